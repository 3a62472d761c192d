"""What every agentq process sets up first: gevent patching, daemon threads, logging and the clock."""
