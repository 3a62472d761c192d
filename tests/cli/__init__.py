"""Tests of the agentq command's clients."""
