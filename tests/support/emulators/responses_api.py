"""An emulator of the OpenAI Responses API: its rules (`responses_rules`), its errors, its event stream.

POST /v1/responses, streaming only. A reasoning model (`responses_rules.REASONING_MODEL`)
opens each answer with a reasoning item, whose `encrypted_content` it hands out only when
`include` asks for it, and remembers which calls that item preceded, so a later request
that drops it, tampers with it or moves it after its calls is refused as OpenAI refuses
it. Usage counts as cached the input a previous request already began with.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

from tests.support.emulators.openai_api import openai_key_refusal
from tests.support.emulators.responses_rules import REASONING_MODEL, Memory, Problem, check
from tests.support.emulators.script import Reply, estimate_tokens, pieces
from tests.support.emulators.server import Emulator

_KINDS = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
          429: "requests", 500: "server_error", 503: "server_error"}
_INCOMPLETE = {"length": "max_output_tokens", "max_tokens": "max_output_tokens",
               "content_filter": "content_filter"}


class ResponsesEmulator(Emulator):
    """The Responses API of a model server; `memory` is what it answered before."""

    path = "/v1/responses"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.memory = Memory()
        self.problems: list[Problem] = []  # every refusal, with the name of its rule
        self._prefixes: list[tuple[str, list[Any]]] = []

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def clear(self) -> None:
        super().clear()
        self.memory = Memory()
        self.problems.clear()
        self._prefixes.clear()

    def authorized(self, headers: dict[str, str]) -> tuple[int, str, str] | None:
        return openai_key_refusal(self.api_key, headers)

    def refusal(self, body: Any, headers: dict[str, str]) -> dict[str, Any] | None:
        problem = check(body, self.memory, self.max_context_tokens)
        if problem is None:
            return None
        self.problems.append(problem)
        return {"error": {"message": problem.message, "type": "invalid_request_error",
                          "param": problem.param, "code": problem.code}}

    def error_body(self, status: int, message: str, kind: str | None, code: str | None) -> dict[str, Any]:
        kind = kind or _KINDS.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def error_frame(self, kind: str) -> bytes:
        return _event({"type": "error", "code": kind, "param": None, "sequence_number": 999,
                       "message": "The server had an error while processing your request."})

    def frames(self, reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
        stream = _Stream(self._response(body))
        yield "text", stream.event("response.created", response=stream.snapshot("in_progress"))
        yield "text", stream.event("response.in_progress", response=stream.snapshot("in_progress"))
        reasoning = self._reasoning_item(reply, body) if REASONING_MODEL.match(body["model"]) else None
        if reasoning is not None:
            yield from (("text", f) for f in _reasoning_frames(stream, reasoning))
        if reply.text or not reply.calls:
            yield from _message_frames(stream, self.next_id("msg_emu"), reply)
        for call in reply.calls:
            item = {"id": self.next_id("fc_emu"), "type": "function_call", "status": "completed",
                    "call_id": self.next_id("call_emu"), "name": call.name, "arguments": call.args_text}
            yield from (("end", f) for f in _call_frames(stream, item))
        self._remember(reasoning, stream.output, body)
        final = stream.snapshot("completed", usage=self._usage(body, stream.output))
        kind = "response.completed"
        if reply.finish in _INCOMPLETE:
            final = {**final, "status": "incomplete",
                     "incomplete_details": {"reason": _INCOMPLETE[reply.finish]}}
            kind = "response.incomplete"
        yield "end", stream.event(kind, response=final)

    # -- what it keeps --------------------------------------------------------------------------

    def _response(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self.next_id("resp_emu"), "object": "response", "created_at": int(time.time()),
            "model": body["model"], "instructions": body.get("instructions"),
            "tools": body.get("tools") or [], "tool_choice": body.get("tool_choice", "auto"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "store": body.get("store", True), "reasoning": body.get("reasoning"),
            "temperature": body.get("temperature"), "top_p": body.get("top_p"),
            "max_output_tokens": body.get("max_output_tokens"), "metadata": body.get("metadata") or {},
            "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "error": None, "incomplete_details": None, "usage": None,
        }

    def _reasoning_item(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        rid = self.next_id("rs_emu")
        secret = "gAAAAB" + hashlib.sha256(f"{self.api_key}:{rid}".encode()).hexdigest()
        self.memory.encrypted[rid] = secret
        wanted = (body.get("reasoning") or {}).get("summary")
        summary = [{"type": "summary_text", "text": reply.thinking or "Thinking it over."}] if wanted else []
        item = {"id": rid, "type": "reasoning", "summary": summary}
        if "reasoning.encrypted_content" in (body.get("include") or ()):
            item["encrypted_content"] = secret
        return item

    def _remember(self, reasoning: dict[str, Any] | None, output: list[dict[str, Any]],
                  body: dict[str, Any]) -> None:
        if reasoning is None:
            return
        rid = reasoning["id"]
        if body.get("store") is not False:
            self.memory.stored.add(rid)
        after = output[1:]
        if after:
            first = after[0]
            key = f"call:{first['call_id']}" if first["type"] == "function_call" else "message"
            self.memory.follower[rid] = key
        for item in after:
            if item["type"] == "function_call":
                self.memory.reasoning_of_call[item["call_id"]] = rid

    def _usage(self, body: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
        head = json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True)
        items = body["input"] if isinstance(body["input"], list) else [body["input"]]
        shared = max((_common(items, seen) for was, seen in self._prefixes if was == head), default=0)
        self._prefixes.append((head, items))
        prompt = estimate_tokens([body.get("instructions"), items, body.get("tools")])
        cached = min(prompt, estimate_tokens([body.get("instructions"), items[:shared], body.get("tools")])
                     if shared else 0)
        reasoning = sum(estimate_tokens(i) for i in output if i["type"] == "reasoning")
        completion = estimate_tokens([i for i in output if i["type"] != "reasoning"]) + reasoning
        return {"input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": prompt + completion}


class _Stream:
    """Numbers the events of one response and collects its finished output items."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.output: list[dict[str, Any]] = []
        self._sequence = 0

    def snapshot(self, status: str, **fields: Any) -> dict[str, Any]:
        return {**self.response, "status": status, "output": list(self.output), **fields}

    def event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return _event(payload)

    def added(self, item: dict[str, Any]) -> bytes:
        return self.event("response.output_item.added", output_index=len(self.output), item=item)

    def done(self, item: dict[str, Any]) -> bytes:
        self.output.append(item)
        return self.event("response.output_item.done", output_index=len(self.output) - 1, item=item)


def _reasoning_frames(stream: _Stream, item: dict[str, Any]) -> Iterator[bytes]:
    # `encrypted_content` in output_item.added may be incomplete: only the done item has it whole.
    yield stream.added({"id": item["id"], "type": "reasoning", "summary": []})
    index = len(stream.output)
    for number, part in enumerate(item["summary"]):
        common = {"item_id": item["id"], "output_index": index, "summary_index": number}
        yield stream.event("response.reasoning_summary_part.added", **common,
                           part={"type": "summary_text", "text": ""})
        for piece in pieces(part["text"], 2):
            yield stream.event("response.reasoning_summary_text.delta", **common, delta=piece)
        yield stream.event("response.reasoning_summary_text.done", **common, text=part["text"])
        yield stream.event("response.reasoning_summary_part.done", **common, part=part)
    yield stream.done(item)


def _message_frames(stream: _Stream, mid: str, reply: Reply) -> Iterator[tuple[str, bytes]]:
    index = len(stream.output)
    empty = {"id": mid, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    yield "text", stream.added(empty)
    common = {"item_id": mid, "output_index": index, "content_index": 0}
    yield "text", stream.event("response.content_part.added", **common,
                               part={"type": "output_text", "text": "", "annotations": []})
    for piece in pieces(reply.text, reply.chunks):
        yield "text", stream.event("response.output_text.delta", **common, delta=piece, logprobs=[])
    part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
    yield "end", stream.event("response.output_text.done", **common, text=reply.text, logprobs=[])
    yield "end", stream.event("response.content_part.done", **common, part=part)
    yield "end", stream.done({**empty, "status": "completed", "content": [part]})


def _call_frames(stream: _Stream, item: dict[str, Any]) -> Iterator[bytes]:
    index = len(stream.output)
    yield stream.added({**item, "arguments": "", "status": "in_progress"})
    for piece in pieces(item["arguments"], 3):
        yield stream.event("response.function_call_arguments.delta", item_id=item["id"],
                           output_index=index, delta=piece)
    yield stream.event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                       name=item["name"], arguments=item["arguments"])
    yield stream.done(item)


def _common(items: list[Any], seen: list[Any]) -> int:
    count = 0
    for mine, theirs in zip(items, seen):
        if mine != theirs:
            break
        count += 1
    return count


def _event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()
