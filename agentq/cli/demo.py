"""`agentq demo`: one scripted conversation with a server tool and a human approval.

It runs embedded (SQLite, in-process worker, no server), prints the transcript with
seq, turn and round ids, checks the invariants and exits 0 only if all of it worked.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable

from agentq.cli.check import check_conversation
from agentq.config import Config
from agentq.core.scope import Scope
from agentq.store import ConversationInfo
from agentq.worker.embedded import Embedded

DEMO_SETTINGS = {
    "system": "You are a helpful assistant that can check the weather and make payments.",
    "script": [
        {
            "text": "Let me look up the weather in Oslo first.",
            "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}],
            "chunks": 4,
            "delay_s": 0.2,
        },
        {
            "text": "It is cold in Oslo. Paying Bob needs your approval.",
            "tool_calls": [{"name": "approve_payment", "args": {"amount": 20.0, "to": "Bob"}}],
            "chunks": 3,
            "delay_s": 0.1,
        },
        {"text": "The payment to Bob was approved. All done.", "chunks": 3, "delay_s": 0.1},
    ],
}
DEMO_SCOPE = Scope(tenant="demo", user="alice")
TIMEOUT_S = 60.0


def run_demo(config: Config, *, db_path: str | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="agentq-demo-") as tmp:
        path = db_path or os.path.join(tmp, "demo.db")
        embedded = Embedded(config.with_(database_url=f"sqlite:///{path}", sweep_s=1.0))
        return embedded.run(_drive)


def _drive(embedded: Embedded) -> int:
    commands, store = embedded.commands, embedded.runtime.store
    conversation = commands.create_conversation(DEMO_SCOPE, DEMO_SETTINGS)
    cid = conversation.id
    print(f"conversation {cid}")
    question = "What is the weather in Oslo? Then pay Bob 20 EUR."
    answer, follow = commands.post_message(cid, question, DEMO_SCOPE)
    embedded.send(follow)
    print(f"> {question}")
    info = _wait(store, cid, lambda c: c.fsm.state == "awaiting_input")
    for call_id, pending in info.fsm.pending.items():
        print(f"  waiting on a person: {pending['name']} ({call_id}); approving as alice")
        _, follow = commands.resolve(cid, call_id, DEMO_SCOPE, status="resolved",
                                     result={"approved": True})
        embedded.send(follow)
    _wait(store, cid, lambda c: c.fsm.state == "idle" and c.fsm.rounds >= 3)
    _print_transcript(store, cid)
    violations = check_conversation(store, cid)
    for violation in violations:
        print(f"VIOLATION {violation}")
    print("invariants: ok" if not violations else f"invariants: {len(violations)} violation(s)")
    return 0 if not violations else 1


def _wait(store, cid: str, ready: Callable[[ConversationInfo], bool]) -> ConversationInfo:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        info = store.conversations.load(cid)
        if info is not None and info.fsm.state == "failed":
            raise RuntimeError(f"the conversation failed: {info.fsm.to_json()}")
        if info is not None and ready(info):
            return info
        time.sleep(0.05)
    raise TimeoutError(f"the demo conversation did not get there in {TIMEOUT_S:.0f} s")


def _print_transcript(store, cid: str) -> None:
    print(f"\n{'seq':>3}  {'type':<13} {'turn':<8} {'round':<8} content")
    for event in store.log.list_events(cid):
        turn = (event.turn_id or "")[:8]
        round_ = (event.round_id or "")[:8]
        print(f"{event.seq:>3}  {event.type:<13} {turn:<8} {round_:<8} {_describe(event)}")
    print()


def _describe(event) -> str:
    content = event.content
    match event.type:
        case "user_msg" | "assistant_msg":
            return repr(content["text"])
        case "tool_call":
            return f"{content['name']}({content['args']}) by {content['executor']}"
        case "tool_result":
            return f"{content['tool_call_id'][:13]} {content['status']}: {content['output']!r}"
        case "suspension":
            return f"waiting on {len(content['pending'])} call(s)"
        case "resolution":
            return f"{content['tool_call_id'][:13]} {content['status']} by {content['by']}"
        case _:
            return str(content)
