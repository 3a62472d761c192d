"""The HTTP side of agentq: the Flask app and its page."""
