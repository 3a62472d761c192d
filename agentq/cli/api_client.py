"""A thin client of agentq's HTTP API (docs/design.md §10), for the terminal commands.

It speaks JSON and Server-Sent Events over httpx2 and nothing else: it never opens the
database, so `agentq chat`, `inspect` and `fork` work against any API, local or remote.
Every failure a person can expect (bad key, unknown id, server down) is a `ClientError`
with a message fit to print.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2

from agentq.errors import AgentqError

DEFAULT_URL = "http://127.0.0.1:8000"
PAGE = 500
# The API sends a keep-alive every 15 s by default: a stream silent for longer is dead.
STREAM_READ_S = 60.0


class ClientError(AgentqError):
    """A request that did not get the answer it asked for."""

    code = "client_error"


class Unreachable(ClientError):
    """No HTTP answer at all: the server is down, the URL is wrong, or it timed out."""

    code = "unreachable"


class ErrorResponse(ClientError):
    """The API answered with an error body `{"error": {"code", "message", "details"}}`."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def __str__(self) -> str:
        return f"{self.message} ({self.code}, HTTP {self.status})"


@dataclass(frozen=True)
class Endpoint:
    url: str
    key: str | None


def endpoint(url: str | None, key: str | None, env: Mapping[str, str]) -> Endpoint:
    """Where the API is and the key to send: flags first, then AGENTQ_API_URL / AGENTQ_API_KEY.

    AGENTQ_API_KEY may hold the server's bootstrap form `tenant:secret` (stored keys never
    contain a colon); the secret is what goes in the Authorization header.
    """
    key = key or env.get("AGENTQ_API_KEY") or None
    if key and ":" in key:
        key = key.split(":", 1)[1]
    return Endpoint(url=(url or env.get("AGENTQ_API_URL") or DEFAULT_URL).rstrip("/"), key=key)


@dataclass(frozen=True)
class StreamItem:
    """One frame of the stream: `kind` is event, delta, retry or end; `seq` is set for events."""

    kind: str
    data: dict[str, Any]
    seq: int | None = None


class Client:
    """The conversation endpoints, one method each; answers are the API's JSON as dicts."""

    def __init__(self, where: Endpoint, *, timeout_s: float = 10.0) -> None:
        self.where = where
        headers = {"Authorization": f"Bearer {where.key}"} if where.key else {}
        self.http = httpx2.Client(base_url=where.url, headers=headers, timeout=timeout_s,
                                  trust_env=False)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- conversations ---------------------------------------------------------------------

    def create_conversation(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/conversations", json={"settings": dict(settings)})

    def conversation(self, cid: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/conversations/{cid}")

    def context(self, cid: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/conversations/{cid}/context")

    def cancel(self, cid: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/conversations/{cid}/cancel")

    def fork(self, cid: str, at_seq: int) -> dict[str, Any]:
        return self._call("POST", f"/v1/conversations/{cid}/fork", json={"at_seq": at_seq})

    # -- messages, events, tool calls ------------------------------------------------------

    def post_message(self, cid: str, content: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/conversations/{cid}/messages", json={"content": content})

    def events(self, cid: str, *, after_seq: int = 0, limit: int = PAGE) -> dict[str, Any]:
        """One page of the log after `after_seq`."""
        return self._call("GET", f"/v1/conversations/{cid}/events",
                          params={"after_seq": after_seq, "limit": limit})

    def all_events(self, cid: str, *, after_seq: int = 0) -> Iterator[dict[str, Any]]:
        """The whole log after `after_seq`, page by page."""
        while True:
            page = self.events(cid, after_seq=after_seq)
            yield from page["events"]
            if page["next_after_seq"] is None:
                return
            after_seq = page["next_after_seq"]

    def resolve(self, cid: str, call_id: str, *, status: str, result: Any = None,
                reason: str | None = None) -> dict[str, Any]:
        """A result (`resolved`/`errored`), or a decision on a gated call (`approved`, or
        `rejected` with an optional reason)."""
        if status in ("approved", "rejected"):
            body: dict[str, Any] = {"status": status}
            if reason:
                body["reason"] = reason
        else:
            body = {"status": status, "result": result}
        return self._call("POST", f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                          json=body)

    @contextmanager
    def stream(self, cid: str, *, after_seq: int, until_idle: bool = False) -> Iterator[Iterator[StreamItem]]:
        """Open the SSE stream; once this yields, the server is subscribed (nothing can be missed).

        Careful: the headers arrive after the server subscribed to live updates, so a
        message posted after entering this block has all its deltas on this stream.
        """
        params = {"after_seq": after_seq, "until_idle": "1" if until_idle else "0"}
        timeout = httpx2.Timeout(self.http.timeout.connect, read=STREAM_READ_S)
        try:
            with self.http.stream("GET", f"/v1/conversations/{cid}/stream", params=params,
                                  headers={"Accept": "text/event-stream"}, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error_response(response)
                yield _frames(response)
        except httpx2.TransportError as exc:
            raise _unreachable(self.where.url, exc) from None

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx2.TransportError as exc:
            raise _unreachable(self.where.url, exc) from None
        if response.status_code >= 400:
            raise _error_response(response)
        return response.json()


def _frames(response: httpx2.Response) -> Iterator[StreamItem]:
    """Parse SSE frames (the subset the API sends: id, event, data, comments)."""
    kind, seq = "message", None
    data: list[str] = []
    for line in response.iter_lines():
        if not line:
            if data:
                yield StreamItem(kind, json.loads("\n".join(data)), seq)
            kind, data, seq = "message", [], None
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            kind = value
        elif name == "data":
            data.append(value)
        elif name == "id" and value.isdigit():
            seq = int(value)


def _error_response(response: httpx2.Response) -> ErrorResponse:
    try:
        body = response.json()["error"]
        return ErrorResponse(response.status_code, body["code"], body["message"], body.get("details"))
    except (ValueError, KeyError, TypeError):
        text = response.text.strip().splitlines()
        message = text[0][:200] if text else response.reason_phrase
        return ErrorResponse(response.status_code, "http_error", message)


def _unreachable(url: str, exc: httpx2.TransportError) -> Unreachable:
    reason = str(exc) or type(exc).__name__
    return Unreachable(f"cannot reach the agentq API at {url} ({reason}); is `agentq dev` or "
                       "`agentq api` running there? (--url or AGENTQ_API_URL)")
