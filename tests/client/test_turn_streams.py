"""A turn's stream, through the SDK, against a real API and worker: from the turn's first
delta to its end, whenever it is opened, however many turns run beside it."""
from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

from agentq.client import AsyncClient, Client, EventOut, StreamDelta, StreamEnd

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

CONVERSATIONS, TURNS = 25, 8  # 200 turns, posted while others run
SLOW = {"text": "One word after another, slowly, so a stream can join in the middle. " * 2,
        "chunks": 24, "delay_s": 4.0}


def answers(conversation: int) -> list[dict]:
    return [{"text": f"Conversation {conversation}, answer {k}: " + "lorem ipsum dolor sit amet " * 2,
             "chunks": 8, "delay_s": 0.25} for k in range(TURNS)]


def check_turn(items: list, turn_id: str, sent: str, texts: set[str]) -> None:
    """The stream is this turn's, from its user_msg and first delta to its end, without a gap."""
    assert all(i.turn_id == turn_id for i in items), "an item of another turn"
    events = [i for i in items if isinstance(i, EventOut)]
    assert events[0].type == "user_msg" and events[0].content["text"] == sent
    assert [e.seq for e in events] == sorted({e.seq for e in events}), "an event twice or out of order"
    (answer,) = [e.content["text"] for e in events if e.type == "assistant_msg"]
    assert answer in texts
    deltas = [i for i in items if isinstance(i, StreamDelta)]
    assert deltas and answer.startswith(deltas[0].text), "the first delta is not the text's start"
    assert "".join(d.text for d in deltas) == answer, "a gap or a repeat in the text"
    assert isinstance(items[-1], StreamEnd) and items[-1].turn_id == turn_id


def test_hundreds_of_turns_posted_while_others_run_each_stream_from_their_first_delta(stack):
    with Client(stack.url, stack.key) as client:
        ids = [client.create_conversation({"script": answers(i)}).id for i in range(CONVERSATIONS)]
        texts = {cid: {a["text"] for a in answers(i)} for i, cid in enumerate(ids)}
        chance = random.Random(24)
        jobs = [(cid, k, chance.random() * 0.5) for k in range(TURNS) for cid in ids]
        chance.shuffle(jobs)

        def one_turn(job: tuple[str, int, float]) -> None:
            cid, k, late_s = job
            sent = f"message {k} to {cid}"
            turn = client.send(cid, sent)
            if late_s > 0.25:  # about half the streams open while their turn already streams
                time.sleep(late_s)
            check_turn(list(turn.stream()), turn.turn_id, sent, texts[cid])

        with ThreadPoolExecutor(max_workers=32) as pool:
            list(pool.map(one_turn, jobs))
        for cid in ids:
            users = [e for e in client.iter_events(cid) if e.type == "user_msg"]
            assert len(users) == TURNS


def test_async_turns_posted_at_once_each_stream_their_own_text(stack):
    async def run() -> None:
        async with AsyncClient(stack.url, stack.key) as client:
            ids = [(await client.create_conversation({"script": answers(i)})).id for i in range(5)]

            async def one_turn(cid: str, k: int) -> None:
                turn = await client.send(cid, f"async {k}")
                items = [item async for item in turn.stream()]
                check_turn(items, turn.turn_id, f"async {k}", {a["text"] for a in answers(ids.index(cid))})

            await asyncio.gather(*(one_turn(cid, k) for k in range(4) for cid in ids))

    asyncio.run(run())


def test_a_stream_opened_mid_round_first_gets_the_text_so_far_in_one_delta(stack):
    with Client(stack.url, stack.key) as client:
        conversation = client.create_conversation({"script": [SLOW]})
        turn = client.send(conversation.id, "go")
        early = turn.stream()
        seen = [next(early) for _ in range(4)]  # user_msg and three deltas
        assert [type(i) for i in seen] == [EventOut, StreamDelta, StreamDelta, StreamDelta]
        late = list(turn.stream())
        early.close()
        first = next(i for i in late if isinstance(i, StreamDelta))
        assert first.index >= 2 and first.text.startswith(seen[1].text + seen[2].text + seen[3].text)
        assert "".join(i.text for i in late if isinstance(i, StreamDelta)) == SLOW["text"]


def test_a_stream_opened_after_its_turn_ended_still_has_the_text_and_the_end(stack):
    with Client(stack.url, stack.key) as client:
        conversation = client.create_conversation({"script": answers(0)})
        turn = client.send(conversation.id, "hello")
        turn.wait()
        again = list(turn.stream())
        check_turn(again, turn.turn_id, "hello", {answers(0)[0]["text"]})


def test_a_queued_turn_streams_from_its_start_once_the_turn_before_it_ends(stack):
    with Client(stack.url, stack.key) as client:
        conversation = client.create_conversation({"script": answers(1)})
        first = client.send(conversation.id, "first")
        second = client.send(conversation.id, "second")
        assert second.queued
        items = list(second.stream())
        check_turn(items, second.turn_id, "second", {a["text"] for a in answers(1)})
        assert first.wait().state == "idle"


class CutOnce(httpx2.HTTPTransport):
    """Breaks the first stream it carries after `after_bytes`, as a dropped connection would."""

    def __init__(self, after_bytes: int) -> None:
        super().__init__()
        self.after_bytes, self.cut = after_bytes, 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        if not request.url.path.endswith("/stream") or self.cut:
            return response
        self.cut += 1
        return httpx2.Response(response.status_code, headers=response.headers,
                               stream=_Cut(response.stream, self.after_bytes),
                               extensions=response.extensions, request=request)


class _Cut(httpx2.SyncByteStream):
    def __init__(self, inner, after_bytes: int) -> None:
        self.inner, self.after_bytes = inner, after_bytes

    def __iter__(self):
        sent = 0
        for chunk in self.inner:
            yield chunk
            sent += len(chunk)
            if sent >= self.after_bytes:
                raise httpx2.ReadError("connection reset (cut by the test)")

    def close(self) -> None:
        self.inner.close()


def test_a_dropped_stream_resumes_with_last_event_id_and_loses_or_repeats_nothing(stack):
    transport = CutOnce(after_bytes=400)
    http = httpx2.Client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.key}"},
                         transport=transport, timeout=30, trust_env=False)
    with Client(stack.url, stack.key, http=http) as client:
        conversation = client.create_conversation({"script": [SLOW]})
        turn = client.send(conversation.id, "go")
        items = list(turn.stream())
    assert transport.cut == 1
    check_turn(items, turn.turn_id, "go", {SLOW["text"]})


def test_the_stream_of_a_queued_turn_ends_when_the_conversation_ends_before_it_starts(stack):
    with Client(stack.url, stack.key) as client:
        conversation = client.create_conversation({"script": [SLOW]})
        client.send(conversation.id, "first")
        queued = client.send(conversation.id, "second")
        client.end_conversation(conversation.id)
        items = list(queued.stream())
        assert [type(i) for i in items] == [StreamEnd]
        assert items[0].state == "ended" and items[0].turn_id == queued.turn_id
