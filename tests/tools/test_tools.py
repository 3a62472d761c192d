"""The tool registry: schemas from hints, readable argument errors, safe calls."""
from __future__ import annotations

import threading
import time
from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, field_validator

from agentq.tools import demo as demo_tools
from agentq.core.scope import SYSTEM_SCOPE, Scope
from agentq.tools import Registry, Tool, ToolArgsError, ToolContext, ToolOutcome, tool

USER = Scope(tenant="acme", user="ada")


def ctx(scope: Scope = USER, call_id: str = "call_1") -> ToolContext:
    return ToolContext(tool_call_id=call_id, conversation_id="conv_1", scope=scope)


class Address(BaseModel):
    street: str
    number: int


@tool
def typed(name: str, count: int, ratio: float, flag: bool, tags: list[str]) -> str:
    """Every simple type."""
    return name


@tool
def optional(city: str, units: str = "metric", days: Optional[int] = None) -> str:
    """Defaults and Optional."""
    return f"{city}/{units}/{days}"


@tool
def ship(to: Address) -> str:
    """Ship to an address."""
    return f"{to.street} {to.number}"


@tool
def titled(title: str) -> str:
    """A parameter called title."""
    return title


@tool
def boom() -> None:
    """Always fails."""
    raise RuntimeError("disk on fire")


def _minus(a: float, b: float) -> float:
    return a - b


def _ask(question: str) -> None:
    """A question for a person or the client."""


def _render(scene: str) -> str:
    return scene


# ---- schema from type hints ------------------------------------------------------------


def test_simple_hints_map_to_their_json_schema_types() -> None:
    properties = typed.spec.parameters["properties"]
    assert properties["name"]["type"] == "string"
    assert properties["count"]["type"] == "integer"
    assert properties["ratio"]["type"] == "number"
    assert properties["flag"]["type"] == "boolean"
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}}


def test_the_schema_is_a_closed_object_with_required_parameters() -> None:
    parameters = typed.spec.parameters
    assert parameters["type"] == "object"
    assert parameters["additionalProperties"] is False
    assert sorted(parameters["required"]) == ["count", "flag", "name", "ratio", "tags"]


def test_defaults_and_optional_make_parameters_not_required() -> None:
    parameters = optional.spec.parameters
    assert parameters["required"] == ["city"]
    assert parameters["properties"]["units"]["default"] == "metric"


def test_a_tool_without_parameters_still_has_properties_and_required() -> None:
    parameters = demo_tools.noop.spec.parameters
    assert parameters["properties"] == {} and parameters["required"] == []


def test_a_pydantic_model_parameter_is_described_by_its_fields() -> None:
    parameters = ship.spec.parameters
    ref = parameters["properties"]["to"]["$ref"].split("/")[-1]
    assert set(parameters["$defs"][ref]["properties"]) == {"street", "number"}


def test_a_pydantic_model_argument_arrives_as_the_model() -> None:
    outcome = Registry([ship]).call("ship", {"to": {"street": "Main", "number": "7"}}, ctx(), timeout_s=5)
    assert outcome == ToolOutcome("ok", "Main 7")


def test_the_tool_context_parameter_is_not_in_the_schema() -> None:
    assert demo_tools.whoami.spec.parameters["properties"] == {}


def test_generated_titles_are_dropped_but_a_parameter_named_title_survives() -> None:
    parameters = titled.spec.parameters
    assert "title" not in parameters
    assert parameters["properties"] == {"title": {"type": "string"}}


def test_the_docstring_is_the_description_and_the_function_name_the_name() -> None:
    spec = demo_tools.get_weather.spec
    assert (spec.name, spec.description) == ("get_weather", "Current weather for a city.")


# ---- the decorator ------------------------------------------------------------------------


def test_a_decorated_function_is_a_tool_still_callable_like_the_function() -> None:
    assert isinstance(demo_tools.add, Tool)
    assert demo_tools.add(2, 3) == 5


def test_the_decorator_takes_a_name_override() -> None:
    renamed = tool(name="plus")(_minus)
    assert renamed.name == "plus"


def test_a_human_tool_without_expires_in_expires_after_a_day() -> None:
    ask = tool(executor="client")(_ask)
    assert (ask.executor, ask.expires_in) == ("client", 86_400.0)


def test_the_decorator_keeps_expires_in_and_timeout() -> None:
    assert demo_tools.approve_payment.expires_in == 3600.0
    assert tool(timeout=30)(lambda: None).timeout == 30.0


@pytest.mark.parametrize(
    "options",
    [
        {"executor": "robot"},
        {"executor": "server", "expires_in": 60},
        {"executor": "human", "timeout": 5},
        {"timeout": 0},
        {"executor": "human", "expires_in": -1},
        {"executor": "human", "queue": "people"},
        {"queue": ""},
        {"queue": "spaces are not queue names"},
    ],
)
def test_inconsistent_decorator_options_are_rejected(options: dict) -> None:
    with pytest.raises(ValueError):
        tool(**options)(lambda: None)


def test_a_tool_may_name_a_queue_of_its_own_and_the_registry_lists_those_by_tool() -> None:
    gpu = tool(name="render", queue="gpu")(_render)
    assert gpu.queue == "gpu" and demo_tools.get_weather.queue is None
    assert Registry([gpu, demo_tools.get_weather]).queues == {"render": "gpu"}


def test_var_args_are_rejected_because_they_have_no_schema() -> None:
    with pytest.raises(ValueError, match="args"):
        tool(lambda *values: None)


# ---- validation -----------------------------------------------------------------------------


def test_validate_returns_the_coerced_arguments_with_defaults() -> None:
    assert optional.validate({"city": "Oslo", "days": "3"}) == {"city": "Oslo", "units": "metric", "days": 3}


def test_a_missing_argument_is_reported_by_name() -> None:
    with pytest.raises(ToolArgsError, match="argument 'city': field required"):
        demo_tools.get_weather.validate({})


def test_an_extra_argument_is_reported_as_unexpected() -> None:
    with pytest.raises(ToolArgsError, match="argument 'town': unexpected argument"):
        demo_tools.get_weather.validate({"city": "Oslo", "town": "Bergen"})


def test_a_wrong_type_is_reported_with_the_argument_and_the_expected_type() -> None:
    with pytest.raises(ToolArgsError, match="argument 'a': input should be a valid number"):
        demo_tools.add.validate({"a": "three", "b": 1})


def test_a_nested_error_names_its_path() -> None:
    with pytest.raises(ToolArgsError, match="argument 'to.number'"):
        ship.validate({"to": {"street": "Main", "number": "seven"}})


def test_arguments_that_are_not_an_object_are_refused() -> None:
    with pytest.raises(ToolArgsError, match="JSON object"):
        demo_tools.add.validate([1, 2])


# ---- registry ---------------------------------------------------------------------------------


def test_from_modules_collects_every_demo_tool() -> None:
    registry = Registry.from_modules(["agentq.tools.demo"])
    assert sorted(registry.names) == ["add", "approve_payment", "get_weather", "lookup_order", "noop",
                                     "refund_order", "sleep", "whoami"]


def test_two_tools_with_one_name_are_rejected() -> None:
    other = tool(name="add")(_minus)
    with pytest.raises(ValueError, match="'add'"):
        Registry([demo_tools.add, other])


def test_the_same_tool_listed_twice_is_one_tool() -> None:
    assert Registry([demo_tools.add, demo_tools.add]).names == ["add"]


def test_specs_of_none_is_every_tool_and_a_list_keeps_its_order() -> None:
    registry = Registry([demo_tools.add, demo_tools.noop])
    assert [spec.name for spec in registry.specs()] == ["add", "noop"]
    assert [spec.name for spec in registry.specs(["noop", "add"])] == ["noop", "add"]


def test_specs_of_unknown_names_fail_listing_them() -> None:
    with pytest.raises(ValueError, match="unknown tools: nope, nada"):
        Registry([demo_tools.add]).specs(["add", "nope", "nada"])


def test_specs_in_code_leave_out_a_tool_the_code_no_longer_registers() -> None:
    registry = Registry([demo_tools.add])
    assert [spec.name for spec in registry.specs_in_code(["removed", "add"])] == ["add"]


def test_a_call_of_a_tool_removed_since_the_conversation_started_says_so() -> None:
    outcome = Registry([demo_tools.add]).check("removed", {}, allowed=["add", "removed"])
    assert outcome is not None and outcome.status == "error"
    assert outcome.output == ("tool 'removed' is no longer available: it was removed since this "
                              "conversation started; available: add")


def test_check_passes_a_good_call() -> None:
    assert Registry([demo_tools.add]).check("add", {"a": 1, "b": 2}) is None


def test_an_invented_tool_is_an_error_outcome_listing_the_available_tools() -> None:
    outcome = Registry([demo_tools.add, demo_tools.noop]).check("launch", {})
    assert outcome == ToolOutcome("error", "unknown tool 'launch'; available: add, noop")


def test_a_tool_not_allowed_in_the_conversation_is_unknown_to_it() -> None:
    outcome = Registry([demo_tools.add, demo_tools.noop]).check("add", {"a": 1, "b": 2}, allowed=["noop"])
    assert outcome == ToolOutcome("error", "unknown tool 'add'; available: noop")


def test_invalid_arguments_are_an_error_outcome_naming_the_tool() -> None:
    outcome = Registry([demo_tools.add]).check("add", {"a": 1})
    assert outcome == ToolOutcome("error", "invalid arguments for 'add': argument 'b': field required")


# ---- calls --------------------------------------------------------------------------------------


def test_a_call_returns_the_tools_value_as_an_ok_outcome() -> None:
    assert Registry([demo_tools.add]).call("add", {"a": 2, "b": 0.5}, ctx(), timeout_s=5) == ToolOutcome("ok", 2.5)


def test_wrong_argument_types_in_a_call_are_an_error_outcome_not_a_crash() -> None:
    outcome = Registry([demo_tools.add]).call("add", {"a": [1], "b": None}, ctx(), timeout_s=5)
    assert outcome.status == "error" and "argument 'a'" in outcome.output and "argument 'b'" in outcome.output


def test_a_call_of_an_unknown_tool_is_an_error_outcome() -> None:
    outcome = Registry([demo_tools.add]).call("nope", {}, ctx(), timeout_s=5)
    assert outcome.status == "error" and outcome.output.startswith("unknown tool 'nope'")


def test_an_exception_becomes_an_error_outcome_with_its_type_and_message() -> None:
    assert Registry([boom]).call("boom", {}, ctx(), timeout_s=5) == ToolOutcome("error", "RuntimeError: disk on fire")


def test_a_slow_tool_times_out_as_an_error_outcome() -> None:
    release = threading.Event()
    stuck = tool(name="stuck")(lambda: release.wait(5))
    started = time.monotonic()
    outcome = Registry([stuck]).call("stuck", {}, ctx(), timeout_s=0.05)
    release.set()
    assert outcome == ToolOutcome("error", "timed out after 0.05s")
    assert time.monotonic() - started < 1


def test_a_tools_own_timeout_wins_over_the_conversation_limit() -> None:
    release = threading.Event()
    stuck = tool(name="stuck", timeout=0.05)(lambda: release.wait(5))
    outcome = Registry([stuck]).call("stuck", {}, ctx(), timeout_s=60)
    release.set()
    assert outcome == ToolOutcome("error", "timed out after 0.05s")


def test_a_human_tool_is_never_run_by_a_worker() -> None:
    runs = []

    def ask(question: str) -> None:
        runs.append(question)

    outcome = Registry([tool(executor="human")(ask)]).call("ask", {"question": "ok?"}, ctx(), timeout_s=5)
    assert outcome.status == "error" and runs == []


def test_a_user_scope_tool_refuses_the_system_scope() -> None:
    outcome = Registry([demo_tools.whoami]).call("whoami", {}, ctx(SYSTEM_SCOPE), timeout_s=5)
    assert outcome == ToolOutcome("error", "tool 'whoami' requires a user scope")


def test_a_user_scope_tool_refuses_a_scope_without_a_user() -> None:
    outcome = Registry([demo_tools.whoami]).call("whoami", {}, ctx(Scope(tenant="acme")), timeout_s=5)
    assert outcome.status == "error"


def test_a_user_scope_tool_sees_the_callers_tenant_and_user() -> None:
    outcome = Registry([demo_tools.whoami]).call("whoami", {}, ctx(), timeout_s=5)
    assert outcome == ToolOutcome("ok", {"tenant": "acme", "user": "ada"})


def test_a_tool_receives_the_tool_call_id_for_idempotency() -> None:
    seen = tool(name="seen")(_call_id)
    assert Registry([seen]).call("seen", {}, ctx(call_id="call_xyz"), timeout_s=5) == ToolOutcome("ok", "call_xyz")


def _call_id(context: ToolContext) -> str:
    return context.tool_call_id


def test_a_pydantic_model_result_is_dumped_as_json() -> None:
    home = tool(name="home")(lambda: Address(street="Main", number=7))
    assert Registry([home]).call("home", {}, ctx(), timeout_s=5) == ToolOutcome("ok", {"street": "Main", "number": 7})


def test_an_unserializable_result_becomes_its_str() -> None:
    odd = tool(name="odd")(lambda: {"when": _Odd()})
    assert Registry([odd]).call("odd", {}, ctx(), timeout_s=5) == ToolOutcome("ok", {"when": "odd thing"})


class _Odd:
    def __str__(self) -> str:
        return "odd thing"


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=5), st.none() | st.booleans() | st.integers() | st.text(max_size=5)))
def test_no_json_arguments_make_a_call_crash(args: dict) -> None:
    outcome = Registry([demo_tools.add]).call("add", args, ctx(), timeout_s=5)
    assert outcome.status in ("ok", "error")


# ---- scope and demo tools ------------------------------------------------------------------------


def test_a_scope_round_trips_through_json() -> None:
    assert Scope.from_json(USER.to_json()) == USER


def test_only_the_system_scope_is_system() -> None:
    assert SYSTEM_SCOPE.is_system and not Scope(tenant="system", user="ada").is_system


def test_get_weather_is_deterministic_and_answers_unknown_cities_with_a_sentence() -> None:
    assert demo_tools.get_weather("Oslo") == demo_tools.get_weather(" oslo ")
    assert demo_tools.get_weather("Atlantis") == "No weather report is available for Atlantis."


def test_the_sleep_tool_refuses_more_than_a_minute() -> None:
    with pytest.raises(ToolArgsError, match="less than or equal to 60"):
        demo_tools.sleep.validate({"seconds": 61})



SEEN_WORDS: list[str] = []


class Word(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def counted(cls, value: str) -> str:
        SEEN_WORDS.append(value)
        return value


@tool
def shout(word: Word) -> str:
    """Shout a word."""
    return word.text.upper()


def test_a_call_validates_its_arguments_once():
    SEEN_WORDS.clear()
    outcome = Registry([shout]).call("shout", {"word": {"text": "hi"}}, ctx(), timeout_s=5)
    assert outcome == ToolOutcome("ok", "HI") and SEEN_WORDS == ["hi"]
