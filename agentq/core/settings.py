"""Conversation settings: the declared shape of what a conversation is configured with.

Settings are a tenant's input (inv. 9): they name an operator's model profile and a model,
never an endpoint or a key, and every number in them is a number (strict types: `true` is
not 1, `"5"` is not 5). What the operator allows beyond their shape (ceilings, which
profiles and models) is checked by `agentq.tenancy.policy` when a conversation is created.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from agentq.core.agent_tools import AgentTool, ObjectSchema
from agentq.core.handoff_targets import HandoffTarget, handoff_targets

# Settings are stored in clear and shown back to clients, so they must never hold a secret.
_SECRET_NAMES = frozenset({
    "api_key", "apikey", "api-key", "x-api-key", "key", "secret", "token", "auth_token",
    "access_token", "authorization", "password",
})
_KEY_LOOKING = re.compile(r"^(sk|rk|pk)-[A-Za-z0-9_\-]{16,}$")
_NO_KEYS = (
    "settings must not hold an API key, and {field} holds one: keys come from the operator's "
    "model profile, or from your own key set with PUT /v1/profiles/{{profile}}/key"
)
# The error type, and the API's error code, of a setting no tenant may send.
FORBIDDEN_SETTING = "forbidden_setting"
# ... and of settings that contradict each other: a rule between fields, which the JSON
# schema of each field cannot state.
CONFLICTING_SETTINGS = "conflicting_settings"
# Former settings that named an endpoint or a key: a tenant could point a worker at any
# host with any of its environment variables as the bearer token (inv. 9).
_NO_ENDPOINTS = (
    "{name} is no longer a conversation setting: endpoints and keys come from the "
    "operator's model profiles; name one in `profile` (GET /v1/profiles lists them)"
)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$"
# The profile of a model that is a function of the operator's code (agentq.providers.function),
# its `model` the function's name: only the operator's code agents use it (inv. 9), never a
# tenant's settings, and no policy file declares a profile of this name.
FUNCTION_PROFILE = "function"


def _integral(value: Any) -> Any:
    """2.0 is the integer 2, as JSON Schema says; `true` and "2" stay what they are (refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def integer(**bounds: Any) -> Any:
    """An integer of a JSON body under strict validation: 3 and 3.0, never true or "3".

    The bounds go inside, before the conversion, so the JSON schema says minimum/maximum.
    """
    return Annotated[int, Field(**bounds), BeforeValidator(_integral)]


Integer = integer()


def _agent_tools(value: Any) -> Any:
    """An agent tool named by its name alone is one with the default description and schema."""
    if isinstance(value, list):
        return [{"name": item} if isinstance(item, str) else item for item in value]
    return value


def _normal(name: str) -> str:
    return name.strip().lower().replace(" ", "_")


def _find_secret(value: Any, where: str) -> str | None:
    """The path of the first field named like a secret or holding a key-looking string, or None.

    Careful: the path is shown to the client, so a name that itself looks like a key is
    not spelled out.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            shown = f"{where}.{'<a key>' if _KEY_LOOKING.match(str(key).strip()) else key}"
            if isinstance(key, str) and _normal(key) in _SECRET_NAMES:
                return shown
            found = _find_secret(item, shown)
            if found:
                return found
        return None
    if isinstance(value, list):
        return next((found for index, item in enumerate(value)
                     if (found := _find_secret(item, f"{where}.{index}"))), None)
    return where if isinstance(value, str) and _KEY_LOOKING.match(value.strip()) else None


class _Strict(BaseModel):
    # Inputs stay out of error messages: a rejected value may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True, strict=True)


class ScriptedFailure(_Strict):
    status: Integer | Literal["timeout"]
    times: integer(ge=0) = 1


class ScriptedCall(_Strict):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptedResponse(_Strict):
    """One scripted model answer (docs/design.md §13)."""

    text: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    chunks: integer(ge=1, le=10_000) = 1
    delay_s: float = Field(default=0.0, ge=0.0, le=3600.0)
    fail: ScriptedFailure | None = None


class Limits(_Strict):
    max_rounds_per_turn: integer(ge=1, le=1000) = 25
    tool_timeout_s: float = Field(default=60.0, gt=0.0, le=86_400.0)
    llm_timeout_s: float = Field(default=300.0, gt=0.0, le=86_400.0)
    # Longest wait for the next bytes of a model response, per attempt; None means
    # llm_timeout_s. Shorter than the step's limit, a stalled connection is retried in time.
    read_timeout_s: float | None = Field(default=None, gt=0.0, le=86_400.0)
    # The largest base64 image a user message may carry, decoded (the API's body limit,
    # 1 MiB, bounds it too); 5 MB is the most Anthropic takes per image.
    max_image_bytes: integer(ge=1, le=5_000_000) = 5_000_000


class Compaction(_Strict):
    """When to summarize (the rendered context passes `max_context_tokens`) and how."""

    max_context_tokens: integer(ge=64) | None = None
    min_keep_turns: integer(ge=1) = 2
    # a tool result longer than this is shortened in the rendered context (never in the
    # log); None: a quarter of max_context_tokens, or no limit without a budget
    max_result_tokens: integer(ge=16) | None = None
    model: str | None = Field(default=None, pattern=NAME_PATTERN)  # one the profile offers
    prompt: str | None = None


class Thinking(_Strict):
    """Anthropic extended thinking: how many tokens the model may think before it answers
    (at least 1024, and below max_tokens, as the API requires)."""

    budget_tokens: integer(ge=1024, le=1_000_000)


class NamedTool(_Strict):
    """A tool the model must call: one of the conversation's tools, by name."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")


class ResponseFormat(_Strict):
    """Structured output: the answer is JSON that follows `schema` (an object schema)."""

    # "schema" shadows a BaseModel attribute: the field is schema_, spelled "schema" in JSON
    # both ways (stored settings are dumped and read back).
    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True, validate_by_alias=True)

    type: Literal["json_schema"] = "json_schema"
    name: str = Field(default="answer", pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    schema_: ObjectSchema = Field(alias="schema")
    strict: bool = True

    @model_validator(mode="after")
    def _an_object_schema(self) -> ResponseFormat:
        if self.schema_.get("type") != "object":
            raise ValueError("response_format.schema must be a JSON schema of type object")
        return self


class ReasoningOptions(_Strict):
    """How much a reasoning model thinks and whether it summarizes its reasoning (OpenAI Responses)."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None


GUARDRAIL_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


# A guardrail that is an agent, as a string names it: `agent:<the agent's name>`.
GUARDRAIL_AGENT_PREFIX = "agent:"


class GuardrailRef(_Strict):
    """A guardrail an agent's settings name: a function the operator's code registered
    (`name`), or an agent whose model answers a verdict (`agent`: one the tenant may use, as
    sub-agents and handoff targets are); agentq.core.guardrails, agentq.core.guardrail_agents.
    The schema says "one of the two" as `oneOf`, so a client's validator knows it too."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [
        {"required": [key], "properties": {key: {"type": "string"}}} for key in ("name", "agent")
    ]})

    name: str | None = Field(default=None, pattern=GUARDRAIL_NAME)
    agent: str | None = Field(default=None, pattern=GUARDRAIL_NAME)  # an agent's name's pattern
    # input guardrails only: run beside the turn's first model call instead of before it
    parallel: bool = False

    @model_validator(mode="after")
    def _a_function_or_an_agent(self) -> GuardrailRef:
        if (self.name is None) == (self.agent is None):
            raise ValueError("a guardrail names a function (name) or an agent (agent), "
                             "one of the two")
        return self

    @property
    def label(self) -> str:
        """What its verdicts and its step keys name it: the function's name, or
        `agent:<name>` (no function's name has a colon)."""
        return self.name if self.name is not None else GUARDRAIL_AGENT_PREFIX + str(self.agent)


def _named_refs(value: Any) -> Any:
    """`"no_pii"` is short for `{"name": "no_pii"}`, `"agent:pii_judge"` for
    `{"agent": "pii_judge"}`."""
    if isinstance(value, list):
        return [_named_ref(item) if isinstance(item, str) else item for item in value]
    return value


def _named_ref(text: str) -> dict[str, str]:
    if text.startswith(GUARDRAIL_AGENT_PREFIX):
        return {"agent": text.removeprefix(GUARDRAIL_AGENT_PREFIX)}
    return {"name": text}


GuardrailRefs = Annotated[list[GuardrailRef] | None, BeforeValidator(_named_refs)]


class Settings(_Strict):
    """A conversation's settings, validated once when it is created."""

    # The operator's model profile (`provider` is its former name, still read); the model
    # is one the profile offers, None meaning the profile's default.
    profile: str = Field(
        default="scripted", pattern=NAME_PATTERN,
        validation_alias=AliasChoices("profile", "provider"),
    )
    model: str | None = Field(default=None, pattern=NAME_PATTERN)
    system: str = ""
    tools: list[str] | None = None
    # other agents offered to the model as tools: each call runs as a child conversation
    # ("researcher" is short for {"name": "researcher"})
    agents: Annotated[list[AgentTool] | None, BeforeValidator(_agent_tools)] = None
    script: list[ScriptedResponse] | None = None
    script_repeat: bool = False  # cycle through the script instead of echoing past its end
    limits: Limits = Field(default_factory=Limits)
    compaction: Compaction = Field(default_factory=Compaction)
    # Provider options (openai, anthropic); None means the profile's or the provider's
    # default. extra_body adds fields to the request body (e.g. response_format) that the
    # profile lets tenants send; it never replaces the others.
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: integer(ge=1, le=1_000_000) | None = None
    extra_body: dict[str, Any] | None = None
    # Anthropic extended thinking; with it on, temperature is not sent (the API refuses it).
    thinking: Thinking | None = None
    # OpenAI reasoning models (o-series, gpt-5*) only: how hard the model thinks.
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    # Which tool the model calls: it decides ("auto"), none, one at least ("required"), or the
    # one named; sent with the model's tools on answer rounds, never on summaries.
    tool_choice: Literal["auto", "none", "required"] | NamedTool | None = None
    response_format: ResponseFormat | None = None
    # For reasoning models on the Responses API (where reasoning_effort alone is read as
    # its effort); setting either marks the model as one that reasons: no temperature is
    # sent, reasoning items are asked for and sent back.
    reasoning: ReasoningOptions | None = None
    # Guardrails the operator's code registered, by name: input ones read the user's message
    # before the turn's first model call (or beside it, `parallel`), output ones the final
    # answer before the turn ends; one that trips fails the turn (agentq.core.guardrails).
    input_guardrails: GuardrailRefs = None
    output_guardrails: GuardrailRefs = None
    # Publish no text deltas: a stream sees the answer once it is committed, so never an
    # answer an output guardrail then refuses.
    hold_deltas: bool = False
    # The name of an instructions function of the operator's code: the system prompt is what
    # it returns for the conversation's context, evaluated at each model step.
    instructions: str | None = Field(default=None, pattern=GUARDRAIL_NAME)
    # Guardrails of every server tool call: on its arguments before it runs, on its result
    # after; a trip refuses the call with an error result the model reads.
    tool_input_guardrails: GuardrailRefs = None
    tool_output_guardrails: GuardrailRefs = None
    # other agents the model may pass the conversation to, by a `transfer_to_<name>` tool
    # ("billing" is short for {"name": "billing"}; agentq.core.handoffs)
    handoffs: Annotated[list[HandoffTarget] | None, BeforeValidator(handoff_targets)] = None
    # Whether the model may call several tools in one answer (None: the API's default, yes);
    # sent with the model's tools on answer rounds.
    parallel_tool_calls: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_endpoint_and_no_key(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in ("base_url", "api_key_ref"):
                if name in data:
                    raise PydanticCustomError(FORBIDDEN_SETTING, _NO_ENDPOINTS.format(name=name),
                                              {"field": name})
            named = next((k for k in data if isinstance(k, str) and _normal(k) in _SECRET_NAMES), None)
            found = named or _find_secret(data.get("extra_body"), "extra_body")
            if found:
                raise PydanticCustomError(FORBIDDEN_SETTING, _NO_KEYS.format(field=found),
                                          {"field": found})
        return data


    @model_validator(mode="after")
    def _thinking_fits_in_max_tokens(self) -> Settings:
        if self.thinking and self.max_tokens and self.max_tokens <= self.thinking.budget_tokens:
            raise _conflict("max_tokens must be greater than thinking.budget_tokens")
        forced = self.tool_choice == "required" or isinstance(self.tool_choice, NamedTool)
        if self.thinking and forced:
            raise _conflict("thinking cannot be on with a tool_choice that forces a tool call")
        return self

    @model_validator(mode="after")
    def _agent_tools_are_named_once(self) -> Settings:
        names = [a.name for a in self.agents or ()]
        twice = sorted({n for n in names if names.count(n) > 1} | set(names) & set(self.tools or ()))
        if twice:
            raise _conflict(f"agents and tools name {', '.join(twice)} more than once")
        return self

    @model_validator(mode="after")
    def _handoffs_are_named_once(self) -> Settings:
        names = [t.tool_name for t in self.handoffs or ()]
        offered = {*(self.tools or ()), *(a.name for a in self.agents or ())}
        twice = sorted({n for n in names if names.count(n) > 1} | set(names) & offered)
        if twice:
            raise _conflict(f"handoffs and tools name {', '.join(twice)} more than once")
        return self

    @model_validator(mode="after")
    def _the_chosen_tool_is_offered(self) -> Settings:
        offered = [*(self.tools or ()), *(a.name for a in self.agents or ()),
                   *(t.tool_name for t in self.handoffs or ())]
        if isinstance(self.tool_choice, NamedTool) and self.tools is not None and (
                self.tool_choice.name not in offered):
            raise _conflict(f"tool_choice names {self.tool_choice.name!r}, which is not in tools")
        return self


    @model_validator(mode="after")
    def _output_guardrails_run_after_the_answer(self) -> Settings:
        later = (*(self.output_guardrails or ()), *(self.tool_input_guardrails or ()),
                 *(self.tool_output_guardrails or ()))
        if any(ref.parallel for ref in later):
            raise _conflict("only input guardrails run in parallel (beside the model call)")
        tools = (*(self.tool_input_guardrails or ()), *(self.tool_output_guardrails or ()))
        if any(ref.agent is not None for ref in tools):
            raise _conflict("a tool call's guardrails are functions; an agent may guard the "
                            "turn's message (input_guardrails) or answer (output_guardrails)")
        return self

    def guardrail_agents(self) -> list[str]:
        """The agents the turn's guardrails name, in order, each once."""
        refs = (*(self.input_guardrails or ()), *(self.output_guardrails or ()))
        return list(dict.fromkeys(ref.agent for ref in refs if ref.agent is not None))


def _conflict(message: str) -> PydanticCustomError:
    return PydanticCustomError(CONFLICTING_SETTINGS, message)


def parse_settings(data: dict[str, Any] | None) -> Settings:
    return Settings.model_validate(data or {})
