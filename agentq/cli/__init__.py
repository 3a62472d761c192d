"""The `agentq` terminal command: the server side (dev, api, migrate, keys, check, demo) and the HTTP clients (chat, inspect, fork)."""
