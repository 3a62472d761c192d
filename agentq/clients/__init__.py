"""The terminal commands that speak to agentq over its HTTP API only: chat, inspect, fork."""
