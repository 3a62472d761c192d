"""The `agentq` command: the server side (dev, api, migrate, keys, check, demo) and its HTTP clients.

chat, inspect and fork speak to agentq over its HTTP API only.
"""
