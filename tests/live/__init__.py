"""Tests of live streams' pub/sub: agentq.live."""
