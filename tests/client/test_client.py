"""Every SDK method, sync and async (one body, `client` fixture), against a real API and worker."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from agentq.client import (
    NO_RETRIES,
    Client,
    Conflict,
    EventOut,
    InvalidRequest,
    NotFound,
    RateLimited,
    StreamDelta,
    StreamEnd,
    Unauthorized,
    Unreachable,
)
from tests.support.processes import ROOT
from tests.support.api_stack import free_port

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

ANSWER = {"text": "Hello there, how can I help you today?", "chunks": 6, "delay_s": 0.3}
APPROVAL = [
    {"text": "Paying Bob needs your approval.",
     "tool_calls": [{"name": "approve_payment", "args": {"amount": 20, "to": "Bob"}}], "chunks": 3},
    {"text": "Done: the payment was handled.", "chunks": 4},
]
GATED = [
    {"text": "A refund of 150 needs your approval.",
     "tool_calls": [{"name": "issue_refund", "args": {"order": "o-1", "amount": 150}}]},
    {"text": "Refunded.", "chunks": 2},
]
QUESTION = [  # the tests' MCP server asks a person to confirm the refund (elicitation)
    {"text": "Asking the CRM.",
     "tool_calls": [{"name": "mcp__crm__confirm_refund", "args": {"order": "o-17", "amount": 5}}]},
    {"text": "Done."},
]
SLOW = [{"text": "A long answer, one slow word at a time. " * 3, "chunks": 30, "delay_s": 60}]


def script(*answers) -> dict:
    return {"script": list(answers)}


def text_of(items) -> str:
    return "".join(i.text for i in items if isinstance(i, StreamDelta))


def test_a_conversation_is_created_read_listed_and_ended(client):
    created = client.create_conversation(script(ANSWER))
    client.create_conversation()
    assert created.state == "idle" and created.last_seq == 0 and created.turn_id is None
    assert client.get_conversation(created.id).id == created.id
    listed = [c.id for c in client.iter_conversations()]
    assert created.id in listed
    page = client.list_conversations(limit=1)
    assert len(page.conversations) == 1 and page.next_cursor is not None
    ended = client.end_conversation(created.id)
    assert ended.state == "ended"
    assert created.id not in [c.id for c in client.list_conversations(status="idle", limit=200).conversations]


def test_a_turn_streams_its_text_from_the_first_delta_to_its_end(client):
    conversation = client.create_conversation(script(ANSWER))
    turn = client.send(conversation.id, "hi")
    items = list(turn.stream())
    assert isinstance(items[0], EventOut) and items[0].type == "user_msg"
    assert text_of(items) == ANSWER["text"]
    assert isinstance(items[-1], StreamEnd) and items[-1].turn_id == turn.turn_id
    assert items[-1].state == "idle"
    assert all(i.turn_id == turn.turn_id for i in items)


def test_wait_returns_the_turns_answer_and_events(client):
    conversation = client.create_conversation(script(ANSWER))
    result = client.send(conversation.id, "hi").wait()
    assert result.state == "idle" and result.text == ANSWER["text"]
    assert [e.type for e in result.events] == ["user_msg", "assistant_msg"]


def test_a_call_approved_while_streaming_lets_the_same_stream_go_on_to_the_end(client):
    conversation = client.create_conversation(script(*APPROVAL))
    turn = client.send(conversation.id, "pay Bob 20")
    items = []
    for item in turn.stream():
        items.append(item)
        if isinstance(item, EventOut) and item.type == "tool_call":
            client.approve(conversation.id, item.content["tool_call_id"])
    results = [i for i in items if isinstance(i, EventOut) and i.type == "tool_result"]
    assert results[0].content["output"] == {"approved": True}
    assert text_of(items) == APPROVAL[0]["text"] + APPROVAL[1]["text"]
    assert items[-1].state == "idle"


def test_wait_can_stop_for_input_and_a_rejection_with_its_reason_reaches_the_tool_result(client):
    conversation = client.create_conversation(script(*APPROVAL))
    turn = client.send(conversation.id, "pay Bob 20")
    waiting = turn.wait(stop_for_input=True)
    assert waiting.state == "awaiting_input" and [p.name for p in waiting.pending] == ["approve_payment"]
    call = client.reject(conversation.id, waiting.pending[0].tool_call_id, "not today")
    assert call.status == "resolved" and call.result == {"approved": False, "reason": "not today"}
    done = turn.wait()
    outputs = [e.content["output"] for e in done.events if e.type == "tool_result"]
    assert done.state == "idle" and outputs == [{"approved": False, "reason": "not today"}]


def test_wait_stops_for_a_call_that_needs_approval_and_the_approved_call_runs(client):
    conversation = client.create_conversation(script(*GATED))
    turn = client.send(conversation.id, "refund order o-1")
    waiting = turn.wait(stop_for_input=True)
    [call] = waiting.pending
    assert waiting.state == "awaiting_input" and (call.name, call.needs_approval) == ("issue_refund", True)
    client.approve(conversation.id, call.tool_call_id)
    done = turn.wait()
    outputs = [e.content["output"] for e in done.events if e.type == "tool_result"]
    assert done.state == "idle" and outputs == ["refunded 150.00 on order o-1"]


def test_wait_stops_for_a_tool_servers_question_and_the_reply_finishes_the_call(client):
    conversation = client.create_conversation({"tools": ["mcp:crm/confirm_refund"], "script": QUESTION})
    turn = client.send(conversation.id, "refund order o-17")
    waiting = turn.wait(stop_for_input=True)
    [call] = waiting.pending
    assert waiting.state == "awaiting_input" and call.elicitation.message == "Refund 5 for o-17?"
    client.reply(conversation.id, call.tool_call_id, {"confirm": True, "note": "checked"})
    done = turn.wait()
    outputs = [e.content["output"] for e in done.events if e.type == "tool_result"]
    assert done.state == "idle" and outputs == ["refunded 5 for o-17 (checked)"]


def test_pending_calls_lists_the_calls_waiting_across_conversations_page_after_page(client):
    waiting = []
    for _ in range(3):
        conversation = client.create_conversation(script(*APPROVAL))
        client.send(conversation.id, "pay Bob").wait(stop_for_input=True)
        waiting.append(conversation.id)
    page = client.pending_calls(executor="human", limit=1)
    assert len(page.items) == 1 and page.has_next_page()
    mine = [call for call in page if call.conversation_id in waiting]  # every page, as reached
    assert [c.conversation_id for c in mine] == waiting
    assert all(c.status == "pending" and c.name == "approve_payment" for c in mine)
    assert [c.tool_call_id for c in client.tool_calls(waiting[0])] == [mine[0].tool_call_id]


def test_an_answer_is_any_json_and_may_be_an_error(client):
    conversation = client.create_conversation(script(*APPROVAL))
    waiting = client.send(conversation.id, "pay Bob").wait(stop_for_input=True)
    call_id = waiting.pending[0].tool_call_id
    answered = client.answer(conversation.id, call_id, "the bank is closed", error=True)
    assert answered.status == "errored" and answered.result == "the bank is closed"
    assert [c.tool_call_id for c in client.tool_calls(conversation.id, status="errored")] == [call_id]


def test_cancel_interrupts_the_running_turn_and_its_stream_ends(client):
    conversation = client.create_conversation(script(*SLOW))
    turn = client.send(conversation.id, "tell me everything")
    for item in turn.stream():
        if isinstance(item, StreamDelta):
            assert client.cancel(conversation.id).state == "idle"
        if isinstance(item, EventOut) and item.type == "assistant_msg":
            assert item.content["interrupted"] is True
    with pytest.raises(Conflict) as refused:
        client.cancel(conversation.id)
    assert refused.value.status == 409


def test_retry_re_drives_a_failed_turn(client):
    failing = {"text": "", "fail": {"status": 400, "times": 1}}
    conversation = client.create_conversation(script(failing))
    failed = client.send(conversation.id, "hi").wait()
    assert failed.state == "failed" and failed.error is not None
    with pytest.raises(Conflict):
        client.retry(client.create_conversation().id)
    assert client.retry(conversation.id).state in ("running", "failed")
    again = client.turn(conversation.id, failed.turn_id).wait()  # the same script fails again
    statuses = [e.content.get("status") for e in again.events if e.type == "error"]
    assert again.state == "failed" and statuses == ["failed_permanent", "retried", "failed_permanent"]


def test_fork_copies_the_log_through_a_turn(client):
    conversation = client.create_conversation(script(ANSWER, ANSWER))
    first = client.send(conversation.id, "one").wait()
    client.send(conversation.id, "two").wait()
    fork = client.fork(conversation.id, first.events[-1].seq)
    assert fork.id != conversation.id
    assert [e.type for e in client.iter_events(fork.id)] == ["user_msg", "assistant_msg"]
    with pytest.raises(Conflict):
        client.fork(conversation.id, 1)  # inside a turn


def test_a_turn_hands_the_conversation_over_and_hand_off_gives_it_back(client):
    suffix = uuid.uuid4().hex[:8]
    support, billing = f"support-{suffix}", f"billing-{suffix}"
    client.create_agent(billing, {"script": [{"text": "Refunded."}], "script_repeat": True})
    client.create_agent(support, {"handoffs": [billing], "script": [
        {"tool_calls": [{"name": f"transfer_to_{billing}",
                         "args": {"reason": "money"}}]}, {"text": "Support again."}]})
    conversation = client.create_conversation(agent=support)
    done = client.send(conversation.id, "refund please").wait()
    assert [e.content["to"] for e in done.events if e.type == "handoff"] == [billing]
    assert client.get_conversation(conversation.id).held_by.name == billing
    back = client.hand_off(conversation.id, support, why="done with billing")
    assert back.held_by.name == support
    with pytest.raises(InvalidRequest):
        client.hand_off(conversation.id, f"nobody-{suffix}")


def test_the_log_reads_page_by_page(client):
    conversation = client.create_conversation(script(ANSWER))
    client.send(conversation.id, "hi").wait()
    page = client.events(conversation.id, after_seq=0, limit=1)
    assert [e.seq for e in page.events] == [1] and page.next_after_seq == 1
    assert [e.seq for e in page.items] == [1] and [e.seq for e in page] == [1, 2]
    assert [e.seq for e in client.iter_events(conversation.id)] == [1, 2]


def test_context_and_profiles_read_as_models(client):
    conversation = client.create_conversation(script(ANSWER))
    client.send(conversation.id, "hi").wait()
    assert client.context(conversation.id).validation.valid
    assert "scripted" in [p.name for p in client.profiles()]


def test_usage_reads_the_tokens_of_a_finished_turn_per_conversation(client):
    conversation = client.create_conversation(script({"text": "Counted.", "chunks": 1}))
    client.send(conversation.id, "hi").wait()
    now = datetime.now(timezone.utc)
    report = client.usage(now - timedelta(hours=2), now + timedelta(hours=1), group_by="hour",
                          by=["conversation"])
    mine = [row for row in report.rows if row.group["conversation"] == conversation.id]
    assert len(mine) == 1 and mine[0].calls == 1 and mine[0].output_tokens > 0
    assert report.by == ["conversation"] and report.tenant is not None


def test_usage_reads_what_a_turn_cost_as_an_exact_decimal(client):
    conversation = client.create_conversation(script({"text": "Priced.", "chunks": 1}))
    client.send(conversation.id, "hi").wait()
    now = datetime.now(timezone.utc)
    report = client.usage(now - timedelta(hours=2), now + timedelta(hours=1),
                          by=["conversation"])
    (row,) = [row for row in report.rows if row.group["conversation"] == conversation.id]
    (answer,) = [e for e in client.events(conversation.id).events if e.type == "assistant_msg"]
    usage = answer.content["usage"]  # at 1.5 and 6 per million tokens: 1500 and 6000 nanos each
    nanos = usage["input_tokens"] * 1500 + usage["output_tokens"] * 6000
    assert isinstance(row.cost, Decimal) and row.cost == Decimal(nanos).scaleb(-9)
    assert answer.content["cost_nanos"] == nanos


def test_usage_takes_dates_iso_strings_and_aware_datetimes(client):
    conversation = client.create_conversation(script({"text": "Counted.", "chunks": 1}))
    client.send(conversation.id, "hi").wait()
    today = datetime.now(timezone.utc).date()
    start, end = today - timedelta(days=1), today + timedelta(days=2)
    for span in [(start, end), (start.isoformat(), end.isoformat()),
                 (f"{start}T00:00:00Z", datetime(end.year, end.month, end.day, tzinfo=timezone.utc))]:
        report = client.usage(*span, by=["conversation"])
        assert [r.calls for r in report.rows if r.group["conversation"] == conversation.id] == [1]
    with pytest.raises(ValueError, match="needs a timezone"):
        client.usage(f"{start}T09:00", end)  # no timezone: refused, not guessed


def test_the_same_idempotency_key_gets_the_same_turn_and_posts_once(client):
    conversation = client.create_conversation(script(ANSWER))
    key = f"order-{uuid.uuid4()}"
    first = client.send(conversation.id, "hi", idempotency_key=key)
    again = client.send(conversation.id, "hi", idempotency_key=key)
    assert again.turn_id == first.turn_id and again.message_id == first.message_id
    first.wait()
    assert [e.type for e in client.iter_events(conversation.id)] == ["user_msg", "assistant_msg"]
    with pytest.raises(InvalidRequest) as reused:
        client.send(conversation.id, "something else", idempotency_key=key)
    assert reused.value.code == "idempotency_key_reused"


def test_a_message_to_a_busy_conversation_queues_rejects_or_interrupts_as_asked(client):
    conversation = client.create_conversation(script(*SLOW, ANSWER, ANSWER))
    running = client.send(conversation.id, "first")
    queued = client.send(conversation.id, "second")
    assert queued.queued and queued.turn_id != running.turn_id
    with pytest.raises(Conflict):
        client.send(conversation.id, "third", on_busy="reject")
    interrupting = client.send(conversation.id, "now", on_busy="interrupt")
    assert running.wait().state in ("idle", "running")
    assert queued.wait().text == ANSWER["text"]
    assert interrupting.wait().text == ANSWER["text"]


def test_the_acting_user_is_sent_with_each_call(client):
    conversation = client.create_conversation(script(ANSWER), user="alice")
    result = client.send(conversation.id, "hi", user="bob").wait()
    assert result.events[0].content["scope"] == {"tenant": "sdk", "user": "bob"}


def test_errors_are_typed_and_carry_the_apis_code(client):
    with pytest.raises(NotFound) as missing:
        client.get_conversation("no-such-conversation")
    assert missing.value.code == "not_found" and missing.value.status == 404
    conversation = client.create_conversation(script(ANSWER))
    with pytest.raises(InvalidRequest) as blank:
        client.send(conversation.id, "   ")
    assert blank.value.status == 422 and "content: must be non-blank text" in str(blank.value)
    with pytest.raises(NotFound):
        list(client.turn(conversation.id, "no-such-turn").stream())
    with pytest.raises(InvalidRequest) as bad:
        client.create_conversation({"no_such_setting": 1})
    assert bad.value.code == "validation_error"


def test_a_wrong_key_is_unauthorized(stack):
    with Client(stack.url, "aq_wrong") as client, pytest.raises(Unauthorized) as refused:
        client.list_conversations()
    assert refused.value.code == "unauthorized"


def test_a_client_without_a_key_says_where_one_comes_from(stack):
    with Client(stack.url, env={}) as client, pytest.raises(Unauthorized) as refused:
        client.list_conversations()
    assert "AGENTQ_API_KEY" in str(refused.value) and "agentq.db.dev-key" in str(refused.value)


def test_an_api_that_is_not_there_is_unreachable():
    with (Client(f"http://127.0.0.1:{free_port()}", "aq_x", retries=NO_RETRIES) as client,
          pytest.raises(Unreachable)):
        client.list_conversations()


def test_a_tenant_past_its_stream_cap_is_rate_limited(stack):
    from tests.client.conftest import STREAM_CAP

    with Client(stack.url, stack.key, retries=NO_RETRIES) as client:
        conversation = client.create_conversation(script(*SLOW))
        turn = client.send(conversation.id, "go")
        streams = [turn.stream() for _ in range(STREAM_CAP)]
        try:
            for stream in streams:
                next(stream)  # open, and its first item read
            with pytest.raises(RateLimited) as limited:
                next(turn.stream())
            assert limited.value.code == "too_many_streams" and limited.value.retry_after_s
        finally:
            for stream in streams:
                stream.close()
            client.cancel(conversation.id)


ASYNC_PROGRAM = """
import asyncio, json, sys
from agentq.client import AsyncClient, StreamDelta

async def main():
    async with AsyncClient() as client:
        conversation = await client.create_conversation(json.loads(sys.argv[1]))
        turn = await client.send(conversation.id, "hi")
        async for item in turn.stream():
            if isinstance(item, StreamDelta):
                break  # a program may stop reading a turn before its end
        result = await turn.wait()
        print(result.text)

asyncio.run(main())
"""


def test_a_program_using_the_async_client_as_documented_exits_with_nothing_on_stderr(stack):
    env = {**os.environ, "AGENTQ_API_URL": stack.url, "AGENTQ_API_KEY": f"sdk:{stack.key}"}
    done = subprocess.run([sys.executable, "-c", ASYNC_PROGRAM, json.dumps(script(ANSWER))],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ANSWER["text"] + "\n"


def test_the_sdk_imports_no_flask_celery_or_sqlalchemy():
    probe = ("import sys, agentq.client; "
             "print(sorted(m for m in ('flask', 'celery', 'sqlalchemy', 'werkzeug') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_a_provider_key_for_a_profile_that_takes_none_is_a_conflict_and_none_to_forget(stack):
    with Client(stack.url, stack.key, retries=NO_RETRIES) as client:
        with pytest.raises(Conflict) as refused:
            client.set_provider_key("openai", "sk-test-0123456789")
        assert refused.value.code == "own_keys_not_taken"
        with pytest.raises(NotFound):
            client.delete_provider_key("openai")


def test_a_turn_s_timeline_and_the_tree_read_as_models_with_the_worker_that_ran_each_step(client):
    conversation = client.create_conversation(script({"text": "Drawn.", "chunks": 1}))
    client.send(conversation.id, "hi").wait()
    turn_id = client.events(conversation.id, after_seq=0, limit=1).events[0].turn_id
    drawn = client.turn_timeline(conversation.id, turn_id)
    [step] = drawn.steps
    assert step.kind == "llm" and [a.outcome for a in step.attempts] == ["done"]
    assert step.attempts[0].worker and drawn.ended_at is not None
    [node] = client.conversation_tree(conversation.id).nodes
    assert node.id == conversation.id and node.model_calls == 1
