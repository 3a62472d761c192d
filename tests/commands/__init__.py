"""Tests of what the outside can do to a conversation: agentq.commands."""
