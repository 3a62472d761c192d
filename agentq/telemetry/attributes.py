"""The attribute names agentq's spans and metrics carry, and the pure mappings onto them.

The `gen_ai.*` names are OpenTelemetry's GenAI semantic conventions (operation, provider,
request and response model, token usage, finish reasons, tools); the `agentq.*` names say
which conversation, turn, round, step and attempt a span belongs to (inv. 11). Nothing here
imports opentelemetry, so the mapping is tested without it.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from agentq.core.request import Request

# agentq's own: what a step span is about.
CONVERSATION_ID = "agentq.conversation.id"
TURN_ID = "agentq.turn.id"
ROUND_ID = "agentq.round.id"
STEP_KEY = "agentq.step.key"
STEP_KIND = "agentq.step.kind"
TENANT = "agentq.tenant"
ATTEMPT = "agentq.step.attempt"
OUTCOME = "agentq.step.outcome"  # succeeded, lost, released, failed, held, deferred, …
REPLACES = "agentq.step.replaces_attempt"  # the attempt a takeover or redelivery replaced
HANDOFF_FROM = "agentq.handoff.from"  # a transfer call: the agent that held the conversation
HANDOFF_TO = "agentq.handoff.to"  # ... and the agent it goes to

# The GenAI semantic conventions.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
AGENT_NAME = "gen_ai.agent.name"
AGENT_VERSION = "gen_ai.agent.version"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOKEN_TYPE = "gen_ai.token.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

CHAT = "chat"
EXECUTE_TOOL = "execute_tool"
INVOKE_AGENT = "invoke_agent"
# The metrics of the conventions, and their units.
TOKEN_USAGE_METRIC = "gen_ai.client.token.usage"
DURATION_METRIC = "gen_ai.client.operation.duration"

# The convention's switch for recording what was said (off unless the operator sets it).
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# agentq's provider kinds, as the conventions' well-known provider names.
_PROVIDERS = {"openai": "openai", "openai_responses": "openai", "anthropic": "anthropic"}


def provider_name(kind: str) -> str:
    """The `gen_ai.provider.name` of a profile's kind; a kind the conventions do not know is
    named for agentq (`agentq.scripted`)."""
    return _PROVIDERS.get(kind, f"agentq.{kind}")


def step_attributes(
    *, conversation_id: str, tenant: str, kind: str, step_key: str, attempt: int,
    turn_id: str | None, round_id: str | None,
) -> dict[str, Any]:
    """What every step span carries (inv. 11: one attempt of one step)."""
    found: dict[str, Any] = {
        CONVERSATION_ID: conversation_id, GEN_AI_CONVERSATION_ID: conversation_id,
        TENANT: tenant, STEP_KIND: kind, STEP_KEY: step_key, ATTEMPT: attempt,
    }
    if turn_id:
        found[TURN_ID] = turn_id
    if round_id:
        found[ROUND_ID] = round_id
    return found


def chat_attributes(*, kind: str, model: str, base_url: str | None, conversation_id: str
                    ) -> dict[str, Any]:
    """What a `chat {model}` span knows before the call goes out."""
    found: dict[str, Any] = {
        OPERATION: CHAT, PROVIDER: provider_name(kind), REQUEST_MODEL: model,
        GEN_AI_CONVERSATION_ID: conversation_id,
    }
    found.update(server_attributes(base_url))
    return found


def server_attributes(base_url: str | None) -> dict[str, Any]:
    """`server.address` and `server.port` of an endpoint URL (nothing for an offline kind)."""
    if not base_url:
        return {}
    parts = urlsplit(base_url)
    if not parts.hostname:
        return {}
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    return {SERVER_ADDRESS: parts.hostname, **({SERVER_PORT: port} if port else {})}


def usage_attributes(usage: Mapping[str, Any]) -> dict[str, Any]:
    """A call's token usage, as the adapters report it (agentq.core.usage), in the conventions' names."""
    names = {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS,
             "cache_read_input_tokens": CACHE_READ_TOKENS, "reasoning_tokens": REASONING_TOKENS}
    return {attribute: usage[field] for field, attribute in names.items()
            if isinstance(usage.get(field), int) and not isinstance(usage.get(field), bool)}


def response_attributes(*, model: str | None, finish_reason: str | None,
                        usage: Mapping[str, Any]) -> dict[str, Any]:
    """What a `chat` span learns from the answer."""
    found = usage_attributes(usage)
    if model:
        found[RESPONSE_MODEL] = model
    if finish_reason:
        found[FINISH_REASONS] = (finish_reason,)
    return found


def tool_attributes(*, name: str, call_id: str, conversation_id: str) -> dict[str, Any]:
    """What an `execute_tool {name}` span carries."""
    return {OPERATION: EXECUTE_TOOL, TOOL_NAME: name, TOOL_CALL_ID: call_id, TOOL_TYPE: "function",
            GEN_AI_CONVERSATION_ID: conversation_id}


def handoff_attributes(*, name: str, call_id: str, conversation_id: str, source: str | None,
                       target: str) -> dict[str, Any]:
    """What the `execute_tool transfer_to_…` span of a model's handoff carries."""
    found = tool_attributes(name=name, call_id=call_id, conversation_id=conversation_id)
    found[HANDOFF_TO] = target
    if source is not None:
        found[HANDOFF_FROM] = source
    return found


def agent_attributes(*, name: str, version: int | None, conversation_id: str) -> dict[str, Any]:
    """What an `invoke_agent {name}` span carries: the agent a sub-agent call starts, and
    the child conversation that runs it."""
    found: dict[str, Any] = {OPERATION: INVOKE_AGENT, AGENT_NAME: name,
                             GEN_AI_CONVERSATION_ID: conversation_id}
    if version is not None:
        found[AGENT_VERSION] = str(version)
    return found


def captures_content(env: Mapping[str, str]) -> bool:
    """Whether the operator turned on recording what was said (the conventions' variable)."""
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("true", "1", "yes")


def input_messages(request: Request) -> str:
    """The request's messages in the conventions' shape, as JSON (only when content is captured)."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "parts": [_text(request.system)]})
    for message in request.messages:
        parts: list[dict[str, Any]] = [_text(message.text)] if message.text else []
        parts.extend({"type": "tool_call", "id": call.id, "name": call.name,
                      "arguments": call.args} for call in message.tool_calls)
        if message.tool_call_id is not None:
            parts = [{"type": "tool_call_response", "id": message.tool_call_id,
                      "response": message.text}]
        messages.append({"role": message.role, "parts": parts})
    return json.dumps(messages, ensure_ascii=False)


def output_messages(text: str, calls: Sequence[Any], finish_reason: str | None) -> str:
    """The answer in the conventions' shape, as JSON (only when content is captured)."""
    parts: list[dict[str, Any]] = [_text(text)] if text else []
    parts.extend({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args}
                 for call in calls)
    return json.dumps([{"role": "assistant", "parts": parts,
                        "finish_reason": finish_reason or "stop"}], ensure_ascii=False)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}
