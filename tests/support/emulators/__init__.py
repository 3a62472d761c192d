"""Strict local emulators of the OpenAI (chat completions, Responses) and Anthropic streaming APIs, on a real HTTP server.

They check each request with rules of their own (never agentq's `wire.check_*`, so a bug
shared with the code under test cannot pass both), answer from a script, and can fail,
stall, reset or hold a stream to watch the client hang up.
"""
from tests.support.emulators.anthropic_api import AnthropicEmulator
from tests.support.emulators.openai_api import OpenAIEmulator
from tests.support.emulators.responses_api import ResponsesEmulator
from tests.support.emulators.script import ByRequest, Call, Fail, Reply, Reset, Stall

__all__ = ["AnthropicEmulator", "ByRequest", "Call", "Fail", "OpenAIEmulator", "Reply", "Reset",
           "ResponsesEmulator", "Stall"]
