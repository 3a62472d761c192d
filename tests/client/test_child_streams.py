"""A parent's turn stream with `include_children`: its sub-agent's text comes as
StreamChildDelta items naming the child, while a stream that did not ask sees none of it;
against a real API process and worker, with the blocking and the async client."""
from __future__ import annotations

import threading
import uuid

from agentq.client import Client, StreamChildDelta, StreamDelta, StreamEnd
from agentq.core.subagents import child_conversation_id

CHILD_TEXT = "Oslo has about seven hundred thousand people."
PARENT_TEXT = "The researcher found it."


def test_a_parent_stream_with_children_carries_the_childs_text_marked_with_its_id(client, stack):
    name = f"researcher_{uuid.uuid4().hex[:8]}"
    client.create_agent(name, {"script": [{"text": CHILD_TEXT, "chunks": 6, "delay_s": 3.0}]})
    conversation = client.create_conversation({
        "agents": [name],
        "script": [{"tool_calls": [{"name": name, "args": {"input": "How big is Oslo?"}}]},
                   {"text": PARENT_TEXT, "chunks": 2}],
    })
    turn = client.send(conversation.id, "ask the researcher")
    plain: list = []
    with Client(stack.url, stack.key) as other:  # a stream of the same turn that did not ask
        follower = threading.Thread(
            target=lambda: plain.extend(other.turn(conversation.id, turn.turn_id).stream()))
        follower.start()
        items = list(turn.stream(include_children=True))
        follower.join()

    (call,) = [i for i in items if getattr(i, "type", None) == "tool_call"]
    child_id = child_conversation_id(conversation.id, call.content["tool_call_id"])
    assert call.content["child_conversation_id"] == child_id
    pieces = [i for i in items if isinstance(i, StreamChildDelta)]
    assert pieces and {p.conversation_id for p in pieces} == {child_id}
    streamed = "".join(p.text for p in pieces)  # from when the stream found the child
    assert streamed and CHILD_TEXT.endswith(streamed)
    assert [p.index for p in pieces] == list(range(pieces[0].index, pieces[-1].index + 1))
    assert "".join(i.text for i in items if isinstance(i, StreamDelta)) == PARENT_TEXT
    assert isinstance(items[-1], StreamEnd) and items[-1].state == "idle"

    assert not [i for i in plain if isinstance(i, StreamChildDelta)]
    assert "".join(i.text for i in plain if isinstance(i, StreamDelta)) == PARENT_TEXT
    assert [i.seq for i in plain if hasattr(i, "seq")] == [i.seq for i in items if hasattr(i, "seq")]
