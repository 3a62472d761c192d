"""Providers: the scripted provider, error classification and the retry policy."""
from __future__ import annotations

import pickle
import threading
import time
from datetime import datetime, timezone

import anthropic
import httpx2
import openai
import pytest

from agentq.core.keys import scripted_call_id
from agentq.core.request import Message, Request
from agentq.core.settings import parse_settings
from agentq.providers import CallContext, Delta, ModelResponse
from agentq.providers.scripted import ScriptedProvider
from agentq.tenancy.access import provider_for
from agentq.providers.errors import ContextTooLong, ProviderError, ProviderTimeout
from agentq.providers import anthropic_errors, openai_errors, retry
from agentq.providers.openai_errors import sdk_error
from agentq.providers.retry import MAX_RETRY_AFTER_S, retry_after, retrying

REQUEST = Request(system="be brief", messages=(Message("user", "hello"), Message("assistant", "hi"),
                                                Message("user", "what now?")))
HTTP_REQUEST = httpx2.Request("POST", "https://api.example.invalid/v1/messages")


def call_ctx(script: list[dict] | None = None, *, attempt: int = 1, rounds: int = 0, key: str = "k1") -> CallContext:
    settings = parse_settings({"script": script} if script is not None else None)
    return CallContext("conv_1", key, "round_1", attempt, rounds, settings)


def run(script: list[dict] | None = None, cancel: threading.Event | None = None, **kw) -> list:
    return list(ScriptedProvider().stream(REQUEST, call_ctx(script, **kw), cancel or threading.Event()))


def deltas(items: list) -> list[Delta]:
    return [item for item in items if isinstance(item, Delta)]


def classify(exc: BaseException) -> ProviderError:
    """What `exc` means, as the adapter of its SDK (or the generic policy) classifies it."""
    if isinstance(exc, openai.OpenAIError):
        return openai_errors.classify(exc)
    if isinstance(exc, anthropic.AnthropicError):
        return anthropic_errors.classify(exc)
    return retry.classify(exc)


def failure(status: int) -> ProviderError:
    """What a scripted failure with this status raises: the openai SDK's error, classified."""
    return openai_errors.classify(sdk_error(status))


def anthropic_error(status: int, error: dict, headers: dict | None = None) -> anthropic.APIStatusError:
    response = httpx2.Response(status, request=HTTP_REQUEST, headers=headers or {},
                               json={"type": "error", "error": error})
    return anthropic.APIStatusError(f"Error code: {status}", response=response,
                                    body={"type": "error", "error": error})


def openai_error(status: int, error: dict, headers: dict | None = None) -> openai.APIStatusError:
    response = httpx2.Response(status, request=HTTP_REQUEST, headers=headers or {}, json={"error": error})
    return openai.APIStatusError(f"Error code: {status} - {error.get('message')}", response=response, body=error)


# ---- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("rate limited", transient=True, status=429, code="rate_limit", retry_after_s=1.5),
        ContextTooLong("too long", status=400),
        ProviderTimeout("slow"),
        ProviderError("no adapter", code="unknown_profile"),
    ],
)
def test_provider_errors_survive_pickling_with_their_attributes(error: ProviderError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert (copy.transient, copy.status, copy.code, copy.retry_after_s) == (
        error.transient, error.status, error.code, error.retry_after_s)


def test_a_context_too_long_error_is_permanent_and_a_timeout_transient() -> None:
    assert not ContextTooLong("x").transient and ProviderTimeout().transient


# ---- the scripted provider ----------------------------------------------------------------------


def test_the_deltas_concatenate_to_the_text_and_end_with_one_response() -> None:
    items = run([{"text": "The weather is fine today.", "chunks": 4}])
    assert "".join(d.text for d in deltas(items)) == "The weather is fine today."
    assert isinstance(items[-1], ModelResponse) and sum(isinstance(i, ModelResponse) for i in items) == 1
    assert items[-1].text == "The weather is fine today."


def test_the_text_is_split_into_chunks_near_equal_deltas_indexed_from_zero() -> None:
    got = deltas(run([{"text": "abcdefghij", "chunks": 3}]))
    assert [d.text for d in got] == ["abcd", "efg", "hij"]
    assert [d.index for d in got] == [0, 1, 2]


def test_a_text_shorter_than_chunks_gives_one_delta_per_character() -> None:
    assert [d.text for d in deltas(run([{"text": "ab", "chunks": 5}]))] == ["a", "b"]


def test_an_empty_text_streams_no_deltas() -> None:
    items = run([{"text": "", "tool_calls": [{"name": "noop"}]}])
    assert len(items) == 1 and isinstance(items[0], ModelResponse)


def test_tool_call_ids_come_from_the_step_key_and_index() -> None:
    calls = [{"name": "get_weather", "args": {"city": "Oslo"}}, {"name": "noop"}]
    response = run([{"text": "", "tool_calls": calls}], key="step_a")[-1]
    assert [c.id for c in response.tool_calls] == [scripted_call_id("step_a", 0), scripted_call_id("step_a", 1)]
    assert response.tool_calls[0].args == {"city": "Oslo"} and response.finish_reason == "tool_calls"


def test_tool_call_ids_are_the_same_on_every_attempt_and_differ_per_step_key() -> None:
    script = [{"tool_calls": [{"name": "noop"}, {"name": "noop"}]}]
    first = run(script, key="step_a", attempt=1)[-1].tool_calls
    again = run(script, key="step_a", attempt=2)[-1].tool_calls
    other = run(script, key="step_b")[-1].tool_calls
    assert first == again
    assert len({c.id for c in first + other}) == 4


def test_the_answer_is_the_script_entry_of_the_rounds_already_committed() -> None:
    script = [{"text": "first"}, {"text": "second"}]
    assert run(script, rounds=1)[-1].text == "second"


def test_past_the_end_of_the_script_it_echoes_the_last_user_text() -> None:
    response = run([{"text": "first"}], rounds=1)[-1]
    assert (response.text, response.tool_calls, response.finish_reason) == ("echo: what now?", (), "stop")


def test_without_a_script_it_echoes() -> None:
    assert run(None)[-1].text == "echo: what now?"


def test_usage_estimates_a_token_per_four_characters() -> None:
    usage = run([{"text": "12345678"}])[-1].usage
    assert usage["output_tokens"] == 2
    assert usage["input_tokens"] == len("be briefhellohiwhat now?") // 4


def test_usage_counts_the_whole_request_as_a_conversation_grows_and_changes() -> None:
    """Each conversation's count is kept and only a request's new messages are added to it;
    a request whose earlier messages are not the last one's is counted whole."""
    settings = parse_settings({"script": [{"text": "ok"}]})

    def input_tokens(conversation_id: str, messages: tuple[Message, ...]) -> int:
        ctx = CallContext(conversation_id, "k1", "round_1", 1, 0, settings)
        request = Request(system="sys", messages=messages)
        return list(ScriptedProvider().stream(request, ctx, threading.Event()))[-1].usage["input_tokens"]

    def whole(messages: tuple[Message, ...]) -> int:
        return -(-(len("sys") + sum(len(m.text) for m in messages)) // 4)

    first = (Message("user", "a" * 40), Message("assistant", "b" * 40))
    grown = first + (Message("user", "c" * 40),)
    middle_changed = (first[0], Message("assistant", "d" * 400), grown[2], Message("user", "e" * 4))
    shorter = (Message("user", "f" * 8),)
    for messages in (first, grown, middle_changed, grown, shorter, shorter + (Message("user", "g"),)):
        assert input_tokens("conv_counted", messages) == whole(messages)
    # another conversation with the same messages counts them from its own start
    assert input_tokens("conv_other", grown) == whole(grown)


def test_the_deltas_are_spread_over_delay_s() -> None:
    started = time.monotonic()
    run([{"text": "abcd", "chunks": 4, "delay_s": 0.2}])
    assert time.monotonic() - started >= 0.2


def test_a_cancel_mid_stream_stops_at_once_without_a_response() -> None:
    cancel = threading.Event()
    stream = ScriptedProvider().stream(REQUEST, call_ctx([{"text": "abcdefghij", "chunks": 10, "delay_s": 5}]),
                                       cancel)
    first = next(stream)
    cancel.set()
    started = time.monotonic()
    rest = list(stream)
    assert isinstance(first, Delta) and rest == []
    assert time.monotonic() - started < 0.2


def test_a_cancel_from_another_thread_interrupts_the_wait() -> None:
    cancel = threading.Event()
    threading.Timer(0.05, cancel.set).start()
    started = time.monotonic()
    items = run([{"text": "slow", "chunks": 1, "delay_s": 5}], cancel=cancel)
    assert items == [] and time.monotonic() - started < 1


@pytest.mark.parametrize(
    ("status", "transient", "code"),
    [
        (429, True, "rate_limit_exceeded"),
        (500, True, "server_error"),
        (503, True, "server_error"),
        (400, False, "invalid_request_error"),
        (401, False, "invalid_api_key"),
        ("timeout", True, "timeout"),
    ],
)
def test_fail_raises_what_the_real_sdk_exception_means_for_the_first_times_attempts(
        status, transient, code) -> None:
    script = [{"text": "finally", "fail": {"status": status, "times": 2}}]
    for attempt in (1, 2):
        with pytest.raises(ProviderError) as raised:
            run(script, attempt=attempt)
        assert (raised.value.transient, raised.value.code) == (transient, code)
    assert run(script, attempt=3)[-1].text == "finally"


def test_a_scripted_429_carries_retry_after_ms() -> None:
    assert sdk_error(429).response.headers["retry-after-ms"] == "10"


def test_provider_for_answers_with_the_scripted_profile() -> None:
    settings = parse_settings({"script": [{"text": "scripted answer"}]})
    ctx = CallContext("conv_1", "k1", "round_1", 1, 0, settings)
    items = list(provider_for(settings).stream(REQUEST, ctx, threading.Event()))
    assert items[-1].text == "scripted answer"


def test_a_conversation_whose_profile_is_gone_fails_its_call_for_good() -> None:
    settings = parse_settings({"profile": "retired-profile"})
    ctx = CallContext("conv_1", "k1", "round_1", 1, 0, settings)
    with pytest.raises(ProviderError) as raised:
        list(provider_for(settings).stream(REQUEST, ctx, threading.Event()))
    assert raised.value.code == "unknown_profile" and not raised.value.transient


# ---- classify -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
@pytest.mark.parametrize("make", [openai_error, anthropic_error])
def test_retryable_statuses_are_transient(make, status: int) -> None:
    error = classify(make(status, {"type": "x", "message": "m"}))
    assert error.transient and error.status == status


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
@pytest.mark.parametrize("make", [openai_error, anthropic_error])
def test_other_4xx_statuses_are_permanent(make, status: int) -> None:
    assert not classify(make(status, {"type": "x", "message": "m"})).transient


def test_a_plain_500_is_retried_not_only_502_to_504() -> None:
    # docs/design.md §16.4: a classifier that knew only 502/503/504 gave up on every plain 500.
    assert classify(sdk_error(500)).transient


def test_openai_insufficient_quota_429_is_permanent() -> None:
    error = classify(openai_error(429, {"message": "You exceeded your current quota",
                                        "type": "insufficient_quota", "code": "insufficient_quota"}))
    assert (error.transient, error.code) == (False, "insufficient_quota")


def test_anthropic_spend_limit_429_is_permanent() -> None:
    error = classify(anthropic_error(429, {"type": "rate_limit_error", "message": "spend limit reached",
                                           "details": {"error_code": "enforced_spend_limit_reached"}}))
    assert (error.transient, error.code) == (False, "enforced_spend_limit_reached")


def test_openai_context_length_exceeded_is_context_too_long() -> None:
    error = classify(openai_error(400, {"message": "This model's maximum context length is 8192 tokens",
                                        "type": "invalid_request_error", "code": "context_length_exceeded"}))
    assert isinstance(error, ContextTooLong) and not error.transient


def test_anthropic_prompt_is_too_long_is_context_too_long() -> None:
    error = classify(anthropic_error(400, {"type": "invalid_request_error",
                                           "message": "prompt is too long: 210000 tokens > 200000 maximum"}))
    assert isinstance(error, ContextTooLong)


@pytest.mark.parametrize(
    "exc",
    [
        openai.APITimeoutError(request=HTTP_REQUEST),
        anthropic.APITimeoutError(request=HTTP_REQUEST),
        httpx2.ReadTimeout("read timed out", request=HTTP_REQUEST),
        TimeoutError("slow"),
    ],
)
def test_timeouts_are_transient_provider_timeouts(exc: BaseException) -> None:
    error = classify(exc)
    assert isinstance(error, ProviderTimeout) and error.transient


@pytest.mark.parametrize(
    "exc",
    [
        openai.APIConnectionError(request=HTTP_REQUEST),
        anthropic.APIConnectionError(request=HTTP_REQUEST),
        httpx2.ConnectError("refused", request=HTTP_REQUEST),
        ConnectionResetError("reset"),
    ],
)
def test_connection_errors_are_transient(exc: BaseException) -> None:
    error = classify(exc)
    assert error.transient and error.code == "connection_error"


def test_an_httpx_status_error_is_classified_by_its_status() -> None:
    response = httpx2.Response(503, request=HTTP_REQUEST, headers={"retry-after": "2"})
    error = classify(httpx2.HTTPStatusError("unavailable", request=HTTP_REQUEST, response=response))
    assert (error.transient, error.status, error.retry_after_s) == (True, 503, 2.0)


@pytest.mark.parametrize("kind, transient", [("overloaded_error", True), ("invalid_request_error", False)])
def test_an_anthropic_error_event_inside_a_200_stream_is_classified_by_its_type(kind, transient) -> None:
    error = classify(anthropic_error(200, {"type": kind, "message": "mid-stream"}))
    assert error.transient is transient and error.code == kind


@pytest.mark.parametrize("kind, transient", [("server_error", True), ("invalid_request_error", False)])
def test_an_openai_error_chunk_inside_the_stream_is_classified_by_its_type(kind, transient) -> None:
    body = {"message": "mid-stream", "type": kind, "param": None, "code": None}
    error = classify(openai.APIError("mid-stream", HTTP_REQUEST, body=body))
    assert error.transient is transient and error.code == kind


def test_an_unknown_exception_is_permanent() -> None:
    assert not classify(ValueError("bug")).transient


def test_a_provider_error_is_already_classified() -> None:
    error = ProviderError("x", transient=True)
    assert classify(error) is error


# ---- retry-after ----------------------------------------------------------------------------------


def test_retry_after_reads_seconds() -> None:
    assert retry_after(httpx2.Headers({"Retry-After": "7"})) == 7.0


def test_retry_after_reads_an_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after({"retry-after": "Thu, 01 Jan 2026 12:00:30 GMT"}, now=now) == 30.0


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25


def test_an_unreadable_retry_after_is_ignored() -> None:
    assert retry_after({"retry-after": "soon"}) is None


# ---- retrying ---------------------------------------------------------------------------------------


class Flaky:
    """Raises `errors` in order, then returns "done"; counts calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_transient_errors_are_retried_until_success_reporting_each_retry() -> None:
    slept, retries = [], []
    fn = Flaky(failure(500), failure(503))
    result = retrying(fn, on_retry=lambda *args: retries.append(args), sleep=slept.append)
    assert (result, fn.calls) == ("done", 3)
    assert [(attempt, error.status, delay) for attempt, error, delay in retries] == [
        (1, 500, slept[0]), (2, 503, slept[1])]


def test_the_backoff_stays_under_its_exponential_ceiling_and_the_cap() -> None:
    slept = []
    fn = Flaky(*[failure(500) for _ in range(7)])
    retrying(fn, max_attempts=8, base_s=0.5, cap_s=4.0, sleep=slept.append)
    assert len(slept) == 7
    assert all(0 <= delay <= min(4.0, 0.5 * 2 ** n) for n, delay in enumerate(slept))


def test_retry_after_ms_is_a_floor_for_the_delay() -> None:
    slept = []
    retrying(Flaky(*[failure(429) for _ in range(4)]), base_s=0.0001, sleep=slept.append)
    assert len(slept) == 4 and all(0.01 <= delay <= 30.0 for delay in slept)


def test_a_retry_after_in_seconds_is_honoured() -> None:
    slept = []
    error = classify(openai_error(503, {"message": "busy"}, headers={"retry-after": "3"}))
    retrying(Flaky(error), base_s=0.001, cap_s=10.0, sleep=slept.append)
    assert 3.0 <= slept[0] <= 10.0


def test_a_retry_after_as_an_http_date_is_honoured() -> None:
    slept = []
    when = datetime.fromtimestamp(time.time() + 20, tz=timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    retrying(Flaky(classify(openai_error(503, {"message": "busy"}, headers={"retry-after": when}))),
             base_s=0.001, cap_s=30.0, sleep=slept.append)
    assert 18.0 <= slept[0] <= 30.0


def test_a_retry_after_above_the_cap_wins_up_to_the_hard_maximum() -> None:
    slept = []
    errors = [classify(openai_error(429, {"message": "slow down"}, headers={"retry-after": value}))
              for value in ("45", "900")]
    retrying(Flaky(*errors), cap_s=30.0, sleep=slept.append)
    assert slept == [45.0, MAX_RETRY_AFTER_S]


def test_a_permanent_error_is_not_retried() -> None:
    fn, retries = Flaky(failure(400)), []
    with pytest.raises(ProviderError) as raised:
        retrying(fn, on_retry=lambda *args: retries.append(args), sleep=lambda s: None)
    assert (fn.calls, retries, raised.value.status, raised.value.transient) == (1, [], 400, False)


def test_a_quota_429_is_not_retried() -> None:
    fn = Flaky(classify(openai_error(429, {"message": "quota", "code": "insufficient_quota"})))
    with pytest.raises(ProviderError):
        retrying(fn, sleep=lambda s: None)
    assert fn.calls == 1


def test_an_exception_that_is_not_a_provider_failure_passes_through_unretried() -> None:
    class Interrupted(Exception):
        pass

    fn = Flaky(Interrupted("the caller's own signal"))
    with pytest.raises(Interrupted):
        retrying(fn, sleep=lambda s: None)
    assert fn.calls == 1


def test_after_max_attempts_the_classified_error_is_raised() -> None:
    fn = Flaky(*[httpx2.ReadTimeout("slow", request=HTTP_REQUEST) for _ in range(5)])
    with pytest.raises(ProviderTimeout):
        retrying(fn, max_attempts=3, sleep=lambda s: None)
    assert fn.calls == 3


def test_with_one_attempt_a_transient_error_is_raised_at_once_and_nothing_is_reported() -> None:
    fn, retries, slept = Flaky(failure(503)), [], []
    with pytest.raises(ProviderError) as raised:
        retrying(fn, max_attempts=1, on_retry=lambda *args: retries.append(args), sleep=slept.append)
    assert (fn.calls, retries, slept, raised.value.status) == (1, [], [], 503)


def test_a_transient_first_failure_is_the_policys_first_attempt_when_every_attempt_fails() -> None:
    fn, retries = Flaky(*[failure(503) for _ in range(3)]), []
    with pytest.raises(ProviderError):
        retrying(fn, max_attempts=3, on_retry=lambda *args: retries.append(args), sleep=lambda s: None)
    assert fn.calls == 3 and [attempt for attempt, _, _ in retries] == [1, 2]


def test_the_scripted_provider_recovers_from_its_scripted_429s_under_the_policy() -> None:
    script = [{"text": "ok now", "fail": {"status": 429, "times": 2}}]
    attempts, retries = iter(range(1, 10)), []

    def attempt() -> list:
        return run(script, attempt=next(attempts))

    items = retrying(attempt, on_retry=lambda *args: retries.append(args), sleep=lambda s: None)
    assert items[-1].text == "ok now" and [r[0] for r in retries] == [1, 2]


# ---- clients per endpoint and key --------------------------------------------------------------------


def test_one_client_per_endpoint_and_key_and_a_forked_child_builds_its_own(monkeypatch) -> None:
    from agentq.providers import pool

    clients, built = pool.Clients(limit=2), []

    def build(http: httpx2.Client) -> object:
        built.append(http)
        return object()

    first = clients.get("openai", "https://a.example", "k1", build)
    assert clients.get("openai", "https://a.example", "k1", build) is first
    assert clients.get("openai", "https://a.example", "k2", build) is not first  # another key
    monkeypatch.setattr(pool.os, "getpid", lambda: -1)  # as in a forked worker
    assert clients.get("openai", "https://a.example", "k1", build) is not first
    assert len(built) == 3 and len({id(http) for http in built}) == 3
    clients.get("openai", "https://b.example", "k1", build)
    clients.get("openai", "https://c.example", "k1", build)
    clients.get("openai", "https://a.example", "k1", build)  # the least used was dropped
    assert len(built) == 6
