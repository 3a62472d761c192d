"""What the outside can do to a conversation: create, post a message, resolve a call, cancel, retry, fork."""
from agentq.commands.conversations import Commands

__all__ = ["Commands"]
