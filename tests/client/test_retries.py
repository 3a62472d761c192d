"""When the SDK sends a request again: on 429 and 503 after their Retry-After, on a lost
answer only if the request is idempotent (an HTTP double of the API, no server needed)."""
from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from agentq.client import AsyncClient, Client, Retries, Unavailable, Unreachable

FAST = Retries(attempts=3, backoff_s=0.001, max_wait_s=0.01)
CONVERSATION = {"id": "c1", "state": "idle", "last_seq": 0, "pending": [], "inbox": 0,
                "summary": None, "agent": None, "settings": {}, "created_at": "x", "updated_at": "x"}


def unavailable(retry_after: str = "0") -> httpx2.Response:
    return httpx2.Response(503, headers={"Retry-After": retry_after},
                           json={"error": {"code": "unavailable", "message": "retry shortly"}})


class Script:
    """Answers the requests in turn with `answers`; remembers what was asked."""

    def __init__(self, *answers) -> None:
        self.answers, self.seen = list(answers), []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def sync_client(script: Script) -> Client:
    http = httpx2.Client(base_url="http://api", transport=httpx2.MockTransport(script))
    return Client("http://api", "aq_k", retries=FAST, http=http)


def test_a_503_is_sent_again_after_its_retry_after_and_the_answer_is_typed():
    script = Script(unavailable(), httpx2.Response(200, json=CONVERSATION))
    assert sync_client(script).get_conversation("c1").id == "c1"
    assert len(script.seen) == 2


def test_a_503_that_lasts_raises_unavailable_with_its_retry_after():
    script = Script(unavailable("0"), unavailable("0"), unavailable("0"))
    with pytest.raises(Unavailable) as failed:
        sync_client(script).get_conversation("c1")
    assert failed.value.code == "unavailable" and failed.value.retry_after_s == 0
    assert len(script.seen) == FAST.attempts


def test_a_lost_answer_to_a_cancel_is_not_sent_again():
    script = Script(httpx2.ReadError("reset"))
    with pytest.raises(Unreachable):
        sync_client(script).cancel("c1")
    assert len(script.seen) == 1


def test_a_lost_answer_to_a_message_is_sent_again_with_the_same_idempotency_key():
    answer = {"message_id": "m1", "turn_id": "t1", "queued": False}
    script = Script(httpx2.ReadError("reset"), httpx2.Response(202, json=answer))
    turn = sync_client(script).send("c1", "hello")
    assert turn.turn_id == "t1"
    keys = {request.headers["Idempotency-Key"] for request in script.seen}
    assert len(script.seen) == 2 and len(keys) == 1
    assert json.loads(script.seen[0].content) == {"content": "hello", "on_busy": "enqueue"}


def test_the_async_client_retries_the_same_way():
    script = Script(unavailable(), httpx2.Response(200, json=CONVERSATION))

    async def run() -> str:
        http = httpx2.AsyncClient(base_url="http://api", transport=httpx2.MockTransport(script))
        async with AsyncClient("http://api", "aq_k", retries=FAST, http=http) as client:
            return (await client.get_conversation("c1")).id

    assert asyncio.run(run()) == "c1" and len(script.seen) == 2


def test_a_503_without_retry_after_is_sent_again_only_if_idempotent():
    refused = httpx2.Response(503, json={"error": {"code": "own_keys_unavailable", "message": "no"}})
    script = Script(refused)
    with pytest.raises(Unavailable) as failed:
        sync_client(script).cancel("c1")
    assert failed.value.code == "own_keys_unavailable" and len(script.seen) == 1
    script = Script(httpx2.Response(502, text="bad gateway"), httpx2.Response(200, json=CONVERSATION))
    assert sync_client(script).get_conversation("c1").id == "c1" and len(script.seen) == 2
