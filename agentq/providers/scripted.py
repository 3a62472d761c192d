"""The scripted provider (docs/design.md §13): deterministic, offline answers from settings.

It streams, fails and cancels like a real one, so the runtime's crash, retry and
interrupt paths are tested without a network. Failures are the real `openai` SDK
exceptions, classified by `openai_errors.classify` exactly as the adapter's are.
"""
from __future__ import annotations

import itertools
import math
import operator
import re
import threading
import time
from collections.abc import Iterator

from agentq.core.keys import canonical_json, scripted_call_id
from agentq.core.lru import WeightedLRU
from agentq.core.request import CallRef, Message, Request
from agentq.core.settings import ScriptedResponse
from agentq.providers.base import CallContext, Delta, ModelResponse

# The scripted model wakes at most this often while it streams: a real model at 100
# tokens a second sends a piece every 10 ms, and a faster script's pieces come in bursts.
PACE_S = 0.01
_CALLED = re.compile(r"^Assistant called ([^(\s]+)\(", re.MULTILINE)


class ScriptedProvider:
    """Answers `settings.script[ctx.rounds_committed]`, or echoes past the end."""

    def stream(
        self, request: Request, ctx: CallContext, cancel: threading.Event
    ) -> Iterator[Delta | ModelResponse]:
        yield from stream_answer(request, _answer_for(request, ctx), ctx, cancel)


def stream_answer(
    request: Request, answer: ScriptedResponse, ctx: CallContext, cancel: threading.Event
) -> Iterator[Delta | ModelResponse]:
    """One scripted answer as a model streams it: its `fail` raised on the attempts it
    names, its text in `chunks` deltas over `delay_s`, then the response, whose tool call
    ids derive from the step key."""
    if answer.fail is not None and ctx.attempt <= answer.fail.times:
        # the exception the real SDK raises, classified as the adapter classifies it (the
        # SDK loads here, not with the model functions that `import agentq` brings)
        from agentq.providers.openai_errors import classify, sdk_error

        raise classify(sdk_error(answer.fail.status))
    pieces = split_text(answer.text, answer.chunks)
    interval_s = answer.delay_s / max(len(pieces), 1)
    if not pieces and cancel.wait(answer.delay_s):
        return
    started = time.monotonic()
    for index, piece in enumerate(pieces):
        # Paced by the model, not by its reader: a piece is due at its place in
        # delay_s, and a reader that fell behind gets the pieces already due at once,
        # as from a real model's socket. It wakes at most every PACE_S, and then hands
        # over every piece due by then, as a socket read does.
        wait_s = started + (index + 1) * interval_s - time.monotonic()
        if cancel.wait(max(wait_s, PACE_S)) if wait_s > 0 else cancel.is_set():
            return
        yield Delta(index=index, text=piece)
    if cancel.is_set():
        return
    yield _response(request, answer, ctx)


def summary_answer(request: Request) -> ScriptedResponse:
    """The answer to a compact step's request: a deterministic summary, never the script's."""
    return ScriptedResponse(text=_summary_of(request))


def _answer_for(request: Request, ctx: CallContext) -> ScriptedResponse:
    if ctx.purpose == "summary":  # summaries do not consume the script
        return summary_answer(request)
    script = ctx.settings.script or []
    if script and ctx.settings.script_repeat:
        return script[ctx.rounds_committed % len(script)]
    if ctx.rounds_committed < len(script):
        return script[ctx.rounds_committed]
    return ScriptedResponse(text="echo: " + _last_user_text(request))


def _summary_of(request: Request) -> str:
    """A deterministic summary of the transcript a compact step sends: what was asked and
    which tools ran, briefly."""
    transcript = _last_user_text(request)
    asked = [line.removeprefix("User: ") for line in transcript.splitlines() if line.startswith("User: ")]
    tools = sorted(set(_CALLED.findall(transcript)))
    head = "; ".join(text[:60] for text in asked[-5:])
    return f"{len(asked)} user message(s), tools used: {', '.join(tools) or 'none'}; last asked: {head}"


def _last_user_text(request: Request) -> str:
    users = [message.text for message in request.messages if message.role == "user"]
    return users[-1] if users else ""


def _response(request: Request, answer: ScriptedResponse, ctx: CallContext) -> ModelResponse:
    calls = tuple(
        CallRef(id=scripted_call_id(ctx.step_key, index), name=call.name, args=dict(call.args))
        for index, call in enumerate(answer.tool_calls)
    )
    answer_text = answer.text + "".join(c.name + canonical_json(c.args) for c in calls)
    return ModelResponse(
        text=answer.text,
        tool_calls=calls,
        usage={"input_tokens": math.ceil(_request_chars(request, ctx.conversation_id) / 4),
               "output_tokens": estimate_tokens(answer_text)},
        finish_reason="tool_calls" if calls else "stop",
        model=request.model or None,
    )


def _request_chars(request: Request, conversation_id: str) -> int:
    """The characters of the request's system prompt, texts and calls."""
    return len(request.system) + _COUNTED.chars(conversation_id, request.messages)


class _CountedMessages:
    """The running character counts of each conversation's last request's messages, kept so
    that its next request counts only the messages that are not the same objects as before.

    Why: a conversation's request grows at every call, and counted afresh (even with each
    message's count memoized) it cost a worker 7% of its CPU in a 400-turn conversation,
    where the peers' fake models count nothing. A request's closed turns are the worker's
    transcript's, the same objects from call to call; its current turn is rendered anew.
    The messages up to the first that is not the same object as in the last request keep
    their running count (found by identity, in C: each compared, none counted); the rest
    are counted, so the count is always the whole request's.
    """

    def __init__(self, conversations: int, max_chars: int) -> None:
        self._lock = threading.Lock()
        # conversation -> its last request's messages and their running counts, weighed by
        # the characters they hold: the messages it keeps alive are bounded by their size,
        # as the worker's caches of them are (a conversation heavier than all is not kept)
        self._last: WeightedLRU[str, tuple[tuple[Message, ...], list[int]]] = WeightedLRU(
            conversations, max_chars)

    def chars(self, conversation_id: str, messages: tuple[Message, ...]) -> int:
        with self._lock:
            last = self._last.get(conversation_id)
        kept: list[int] = []
        if last is not None:
            (seen, running), _ = last
            same = next(itertools.compress(itertools.count(), map(operator.is_not, seen, messages)),
                        min(len(seen), len(messages)))
            kept = running[:same]
        added = itertools.accumulate((message.memo(_message_chars) for message in messages[len(kept):]),
                           initial=kept[-1] if kept else 0)
        next(added)  # the initial count, already kept
        running = kept + list(added)
        total = running[-1] if running else 0
        with self._lock:
            self._last.put(conversation_id, (messages, running), total + len(messages))
        return total


_COUNTED = _CountedMessages(conversations=1024, max_chars=64_000_000)


def _message_chars(message: Message) -> int:
    return len(message.text) + sum(len(call.name + canonical_json(call.args))
                                   for call in message.tool_calls)


def estimate_tokens(text: str) -> int:
    """About four characters a token: good enough for a fake model's usage."""
    return math.ceil(len(text) / 4)


def split_text(text: str, chunks: int) -> list[str]:
    """`text` in `chunks` near-equal pieces (fewer if the text is shorter; none if empty)."""
    count = min(chunks, len(text))
    if count == 0:
        return []
    size, extra = divmod(len(text), count)
    pieces, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces
