"""Agents: named, versioned definitions a conversation is started from (agentq.core.agents),
defined in Python next to the tools or through the API per tenant."""
from agentq.agents.code import Agent, CodeAgents, agent, handoff

__all__ = ["Agent", "CodeAgents", "agent", "handoff"]
