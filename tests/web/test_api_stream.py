"""GET …/stream: replay after a seq, resume with Last-Event-ID, live deltas, keep-alives, hang-ups."""
from __future__ import annotations

import threading

import pytest

from agentq.live.pubsub import channel
from agentq.core.scope import Scope
from tests.support.api import APPROVAL, WEATHER, SseReader, events_of


def _stream(api, cid, headers, **query):
    response = api.client.get(f"/v1/conversations/{cid}/stream", headers=headers,
                              query_string=query, buffered=False)
    assert response.status_code == 200, response.get_data()
    assert response.mimetype == "text/event-stream"
    return SseReader(response)


def _finished(api, alice, script=WEATHER):
    cid = api.create(alice, script=script)
    api.say(cid, "weather?", alice)
    api.run()
    return cid


def test_the_stream_replays_events_after_a_seq_and_ends_when_idle(api, alice):
    cid = _finished(api, alice)
    frames = _stream(api, cid, alice, after_seq=2, until_idle=1).frames()
    events = events_of(frames)
    assert [e["seq"] for e in events] == [3, 4, 5]
    assert [f.id for f in frames if f.event == "event"] == ["3", "4", "5"]
    assert events == api.get(f"/v1/conversations/{cid}/events", alice,
                             query_string={"after_seq": 2}).json["events"]
    assert frames[-1].event == "end" and frames[-1].data == {"state": "idle", "last_seq": 5}


def test_last_event_id_wins_over_after_seq(api, alice):
    cid = _finished(api, alice)
    reader = SseReader(api.client.get(
        f"/v1/conversations/{cid}/stream", headers={**alice, "Last-Event-ID": "4"},
        query_string={"after_seq": 1, "until_idle": 1}, buffered=False))
    assert [e["seq"] for e in events_of(reader.frames())] == [5]


@pytest.mark.parametrize("last_event_id", ["x", "-1", "1.5"])
def test_a_last_event_id_that_is_not_a_seq_is_422(api, alice, last_event_id):
    cid = api.create(alice)
    response = api.client.get(f"/v1/conversations/{cid}/stream",
                              headers={**alice, "Last-Event-ID": last_event_id})
    assert response.status_code == 422


def test_resuming_mid_turn_with_last_event_id_has_no_gap_and_no_duplicate(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    first = _stream(api, cid, alice)
    first.next()  # subscribed
    api.run()  # the turn now waits for a person
    seen = []
    while not seen or seen[-1]["type"] != "tool_call":
        frame = first.next()
        if frame.event == "event":
            seen.append(frame.data)
    first.close()  # the client drops mid-turn, after the tool_call
    [call] = api.store.calls.list_of(cid, status="pending")
    api.client.post(f"/v1/conversations/{cid}/tool-calls/{call.id}/resolution",
                    json={"status": "resolved", "result": {"ok": True}}, headers=alice)
    api.run()
    second = SseReader(api.client.get(
        f"/v1/conversations/{cid}/stream", headers={**alice, "Last-Event-ID": str(seen[-1]["seq"])},
        query_string={"until_idle": 1}, buffered=False))
    seen += events_of(second.frames())
    assert [e["seq"] for e in seen] == list(range(1, len(api.types(cid)) + 1))
    assert [e["type"] for e in seen][-3:] == ["resolution", "tool_result", "assistant_msg"]


def _read(reader, *, events: int) -> list:
    """Frames until `events` events arrived and the deltas of each answer among them spell
    it, then stop reading.

    The runtime ran to the end before the stream is read, so the stream meets the
    notices in a burst; `until_idle` would end it at the first catch-up, before the
    deltas still queued behind it. How many deltas an answer streams in depends on how
    its pieces fell into the publishing windows (`runtime.deltas`), so the text is what
    tells that they are all in.
    """
    frames: list = []
    while len(events_of(frames)) < events or not _answers_spelled(frames):
        frames.append(reader.next())
    reader.close()
    return frames


def _answers_spelled(frames: list) -> bool:
    deltas = [f.data for f in frames if f.event == "delta"]
    return all("".join(d["text"] for d in deltas if d["round_id"] == e["round_id"])
               == e["content"]["text"]
               for e in events_of(frames) if e["type"] == "assistant_msg")


def test_each_rounds_deltas_carry_that_rounds_id_and_their_position(api, alice):
    cid = api.create(alice, script=WEATHER)
    reader = _stream(api, cid, alice)
    reader.next()  # subscribed before anything happens
    api.say(cid, "weather?", alice)
    api.run()
    frames = _read(reader, events=5)
    answers = [e for e in events_of(frames) if e["type"] == "assistant_msg"]
    deltas = [f.data for f in frames if f.event == "delta"]
    assert len(answers) == 2 and answers[0]["round_id"] != answers[1]["round_id"]
    for answer in answers:
        mine = [d for d in deltas if d["round_id"] == answer["round_id"]]
        assert [d["index"] for d in mine] == list(range(len(mine))) and mine
        assert "".join(d["text"] for d in mine) == answer["content"]["text"]
        assert {d["turn_id"] for d in mine} == {answer["turn_id"]}
        assert {d["attempt"] for d in mine} == {1}


def test_a_retry_is_forwarded_as_a_retry_frame(api, alice):
    script = [{"text": "Fine.", "fail": {"status": 429, "times": 1}}]
    cid = api.create(alice, script=script)
    reader = _stream(api, cid, alice)
    reader.next()
    api.say(cid, "hi", alice)
    api.run()
    frames = _read(reader, events=2)
    [retry] = [f.data for f in frames if f.event == "retry"]
    assert retry["attempt"] == 1 and retry["transient"] is True
    deltas = [f.data for f in frames if f.event == "delta"]
    assert deltas and {(d["attempt"], d["round_id"]) for d in deltas} == {(2, retry["round_id"])}


def test_a_quiet_stream_sends_keep_alive_comments(api, alice):
    cid = api.create(alice)
    reader = _stream(api, cid, alice)
    frames = [reader.next() for _ in range(4)]
    reader.close()
    assert [f.comment for f in frames[1:]].count("keep-alive") >= 2


def test_a_client_that_goes_away_is_unsubscribed(api, alice):
    cid = api.create(alice)
    reader = _stream(api, cid, alice)
    reader.next()
    subscribers = lambda: dict(api.pubsub.client.pubsub_numsub(channel(cid)))[channel(cid).encode()]  # noqa: E731
    assert subscribers() == 1
    reader.close()
    assert subscribers() == 0


def test_an_event_written_without_a_notice_still_arrives_on_a_keep_alive_tick(api, alice):
    cid = api.create(alice)
    reader = _stream(api, cid, alice)
    assert reader.next().event == "retry-interval"
    assert reader.next().comment == "keep-alive"  # replay done, the stream is live
    api.services.commands.post_message(cid, "hi", Scope("acme", "alice"))  # publishes nothing
    frames = reader.frames(limit=4)
    reader.close()
    assert [e["type"] for e in events_of(frames)] == ["user_msg"]


def test_the_stream_subscribes_before_it_reads_the_log(api, alice, monkeypatch):
    """So an event committed during the replay is announced to this stream, never lost."""
    cid = api.create(alice)
    api.say(cid, "hi", alice)
    calls = []
    subscribe, list_events = api.pubsub.subscribe, api.store.log.list_events
    monkeypatch.setattr(api.pubsub, "subscribe", lambda *a, **k: calls.append("subscribe") or subscribe(*a, **k))
    monkeypatch.setattr(api.store.log, "list_events", lambda *a, **k: calls.append("read") or list_events(*a, **k))
    frames = _stream(api, cid, alice, until_idle=0).frames(limit=2)
    assert events_of(frames)[0]["seq"] == 1
    assert calls[:2] == ["subscribe", "read"]


def test_an_event_committed_after_the_replay_is_sent_once(api, alice):
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    reader = _stream(api, cid, alice)
    frames = [reader.next() for _ in range(5)]  # the replay: retry interval + 4 events
    [call] = api.store.calls.list_of(cid, status="pending")
    api.client.post(f"/v1/conversations/{cid}/tool-calls/{call.id}/resolution",
                    json={"status": "resolved"}, headers=alice)
    frames += reader.frames(limit=4)
    reader.close()
    assert [e["seq"] for e in events_of(frames)] == [1, 2, 3, 4, 5, 6]


def test_a_stream_follows_a_turn_run_by_another_thread(api, alice):
    cid = api.create(alice, script=[{**WEATHER[0], "delay_s": 0.2}, {**WEATHER[1], "delay_s": 0.2}])
    reader = _stream(api, cid, alice, until_idle=1)
    reader.next()
    api.say(cid, "weather?", alice)
    worker = threading.Thread(target=api.run)
    worker.start()
    frames = reader.frames()
    worker.join(timeout=30)
    assert [e["type"] for e in events_of(frames)] == api.types(cid)
    assert frames[-1].event == "end" and frames[-1].data["state"] == "idle"
    assert _answers_spelled(frames)  # every delta came before the end


def test_streaming_an_unknown_conversation_is_404(api, alice):
    response = api.client.get("/v1/conversations/nope/stream", headers=alice)
    assert response.status_code == 404 and response.json["error"]["code"] == "not_found"


def test_a_stream_whose_pubsub_is_down_is_503_before_any_frame(api, alice, monkeypatch):
    cid = api.create(alice)

    def down(*args, **kwargs):
        raise ConnectionError("redis is gone")

    monkeypatch.setattr(api.pubsub, "subscribe", down)
    response = api.client.get(f"/v1/conversations/{cid}/stream", headers=alice)
    assert response.status_code == 503
    assert response.json["error"]["code"] == "unavailable"
    assert response.headers["Retry-After"] == "5"


def test_a_stream_whose_database_cannot_be_reached_is_503_before_any_frame(api, alice, monkeypatch):
    from agentq.errors import Unavailable

    cid = _finished(api, alice)
    turn_id = api.get(f"/v1/conversations/{cid}", alice).json["turn_id"]

    def down(*args, **kwargs):
        raise Unavailable("the database cannot be reached now (OperationalError); retry shortly")

    monkeypatch.setattr(api.store.log, "list_events", down)  # the replay's read, after the lookups
    response = api.client.get(f"/v1/conversations/{cid}/stream", headers=alice,
                              query_string={"turn_id": turn_id})
    assert response.status_code == 503
    assert response.json["error"]["code"] == "unavailable"
    monkeypatch.undo()
    assert _stream(api, cid, alice, turn_id=turn_id).frames()[-1].event == "end"


def test_a_turn_stream_replays_only_its_turn_and_ends_with_it(api, alice):
    cid = api.create(alice, script=WEATHER + WEATHER)
    first = api.say(cid, "weather?", alice).json["turn_id"]
    api.run()
    second = api.say(cid, "and again?", alice).json["turn_id"]
    api.run()
    frames = _stream(api, cid, alice, turn_id=first).frames()
    events = events_of(frames)
    assert {e["turn_id"] for e in events} == {first} and events[0]["type"] == "user_msg"
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    deltas = "".join(f.data["text"] for f in frames if f.event == "delta")
    assert deltas == "".join(e["content"]["text"] for e in events if e["type"] == "assistant_msg")
    assert frames[-1].event == "end" and frames[-1].data["turn_id"] == first
    later = events_of(_stream(api, cid, alice, turn_id=second).frames())
    assert later[0]["seq"] == 6 and {e["turn_id"] for e in later} == {second}


def test_a_turn_stream_of_a_turn_the_conversation_does_not_have_is_404(api, alice, mallory):
    cid = _finished(api, alice)
    missing = api.client.get(f"/v1/conversations/{cid}/stream", headers=alice,
                             query_string={"turn_id": "no-such-turn"})
    assert missing.status_code == 404 and missing.json["error"]["code"] == "not_found"
    turn_id = api.get(f"/v1/conversations/{cid}", alice).json["turn_id"]
    other = api.client.get(f"/v1/conversations/{cid}/stream", headers=mallory,
                           query_string={"turn_id": turn_id})
    assert other.status_code == 404


def test_include_children_takes_only_a_flag_and_another_tenants_parent_is_404(api, alice, mallory):
    cid = api.create(alice)
    bad = api.client.get(f"/v1/conversations/{cid}/stream", headers=alice,
                         query_string={"include_children": "yes"})
    assert bad.status_code == 422
    foreign = api.client.get(f"/v1/conversations/{cid}/stream", headers=mallory,
                             query_string={"include_children": "1"})
    assert foreign.status_code == 404
    assert api.services.open_streams.open_count() == 0


def test_a_stream_with_children_whose_calls_cannot_be_read_is_503_and_holds_no_slot(
        api, alice, monkeypatch):
    from agentq.errors import Unavailable

    cid = api.create(alice)

    def down(*args, **kwargs):
        raise Unavailable("the database cannot be reached now (OperationalError); retry shortly")

    monkeypatch.setattr(api.store.calls, "list_of", down)  # the children running, read at open
    response = api.client.get(f"/v1/conversations/{cid}/stream", headers=alice,
                              query_string={"include_children": "1"})
    assert response.status_code == 503
    assert api.services.open_streams.open_count() == 0
    assert dict(api.pubsub.client.pubsub_numsub(channel(cid)))[channel(cid).encode()] == 0
