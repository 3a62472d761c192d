"""A server tool call as a worker runs it: coroutines awaited, failures logged, results capped."""
from __future__ import annotations

import asyncio
import logging
import threading

from agentq.tools.calls import capped
from agentq.tools import Registry, ToolContext, ToolOutcome, tool
from agentq.core.scope import Scope

CTX = ToolContext(tool_call_id="call_7", conversation_id="conv_3", scope=Scope("acme", "ada"))


@tool
async def fetch(key: str) -> str:
    """Wait on the event loop, then answer."""
    await asyncio.sleep(0.01)
    return f"fetched {key}"


@tool
async def async_boom(reason: str) -> str:
    """Fails after an await."""
    await asyncio.sleep(0)
    raise LookupError(reason)


@tool
def sync_boom() -> str:
    """Fails at once."""
    raise RuntimeError("disk on fire")


@tool
def huge(size: int) -> str:
    """A result of `size` characters."""
    return "y" * size


@tool
def rows(count: int) -> list[dict]:
    """`count` rows of a table."""
    return [{"id": n, "name": f"row {n}"} for n in range(count)]


def test_an_async_tool_is_awaited_and_its_value_is_the_result() -> None:
    outcome = Registry([fetch]).call("fetch", {"key": "k1"}, CTX, timeout_s=5)
    assert outcome == ToolOutcome("ok", "fetched k1")


def test_async_tools_called_at_once_from_many_threads_each_get_their_own_result() -> None:
    registry = Registry([fetch])
    results: dict[int, ToolOutcome] = {}

    def call(n: int) -> None:
        results[n] = registry.call("fetch", {"key": f"k{n}"}, CTX, timeout_s=10)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {n: ToolOutcome("ok", f"fetched k{n}") for n in range(8)}


def test_an_async_tool_that_raises_is_an_error_outcome_with_its_type_and_message() -> None:
    outcome = Registry([async_boom]).call("async_boom", {"reason": "no such order"}, CTX, timeout_s=5)
    assert outcome == ToolOutcome("error", "LookupError: no such order")


def test_an_async_tool_that_outlives_its_limit_times_out() -> None:
    @tool(name="stalls", timeout=0.05)
    async def stalls() -> str:
        await asyncio.sleep(30)
        return "never"

    assert Registry([stalls]).call("stalls", {}, CTX, timeout_s=60) == ToolOutcome(
        "error", "timed out after 0.05s")


def test_a_tool_that_raises_is_logged_with_its_traceback_and_the_calls_context(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="agentq.tools"):
        Registry([sync_boom]).call("sync_boom", {}, CTX, timeout_s=5)
    [record] = [r for r in caplog.records if r.name == "agentq.tools"]
    assert record.levelno == logging.WARNING
    assert "sync_boom raised RuntimeError: disk on fire" in record.getMessage()
    assert (record.tool, record.tool_call_id, record.conversation_id) == ("sync_boom", "call_7", "conv_3")
    assert "raise RuntimeError(\"disk on fire\")" in caplog.text  # the tool's own line


def test_an_async_tools_exception_is_logged_with_the_line_that_raised_it(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="agentq.tools"):
        Registry([async_boom]).call("async_boom", {"reason": "gone"}, CTX, timeout_s=5)
    assert "raise LookupError(reason)" in caplog.text


def test_a_result_within_the_cap_is_unchanged() -> None:
    outcome = Registry([huge]).call("huge", {"size": 100}, CTX, timeout_s=5, max_result_chars=100)
    assert outcome == ToolOutcome("ok", "y" * 100)


def test_a_result_over_the_cap_is_cut_and_says_so_with_its_original_size() -> None:
    outcome = Registry([huge]).call("huge", {"size": 5_000_000}, CTX, timeout_s=5, max_result_chars=1000)
    assert outcome.status == "ok"
    assert outcome.output == "y" * 1000 + "\n[result cut: 5,000,000 characters, the first 1,000 shown]"


def test_a_structured_result_over_the_cap_is_cut_as_its_json_text() -> None:
    outcome = Registry([rows]).call("rows", {"count": 1000}, CTX, timeout_s=5, max_result_chars=50)
    assert outcome.output.startswith('[{"id": 0, "name": "row 0"}, {"id": 1, ')
    assert outcome.output.endswith(" characters, the first 50 shown]")


def test_an_error_message_over_the_cap_is_cut_too() -> None:
    assert capped("e" * 80, 10) == "e" * 10 + "\n[result cut: 80 characters, the first 10 shown]"


def test_no_cap_keeps_any_size() -> None:
    outcome = Registry([huge]).call("huge", {"size": 100_000}, CTX, timeout_s=5)
    assert len(outcome.output) == 100_000


def test_the_operator_sets_the_cap_in_the_environment_and_it_defaults_to_32000_characters() -> None:
    from agentq.config import Config

    assert Config.from_env({}).tool_result_max_chars == 32_000
    assert Config.from_env({"AGENTQ_TOOL_RESULT_MAX_CHARS": "500"}).tool_result_max_chars == 500
