"""What a step costs deep into a conversation, with and without compaction.

For each history length (turns already in the log) it prints the time per step, the
CPU time per step of the process (the steps run in it: steadier than wall time on a busy
machine) and the rows read per step over a few real turns (model -> tool -> model, scripted, no
delay), run in-process on PostgreSQL so the broker hop does not blur the figures.
The history before the measured turns is written straight into the log (whole
turns, as the runtime writes them) to reach 10,000 turns in seconds; with
compaction on it also gets the summary a compactor would have left.

    python bench/history.py [--turns 10,1000,10000] [--measure 10]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import event  # noqa: E402

from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.core import drafts  # noqa: E402
from agentq.core.events import ToolCallRecord  # noqa: E402
from agentq.worker.wiring import build_runtime  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from bench.steps import SCOPE  # noqa: E402
from tests.support.drive import drain  # noqa: E402

SCRIPT = [{"tool_calls": [{"name": "noop", "args": {}}]}, {"text": "ok"}]
BUDGET = 4000


def prefill(store, cid: str, turns: int) -> None:
    """Write `turns` whole turns into the log, 500 to a transaction."""
    now = datetime.now(timezone.utc)
    for start in range(0, turns, 500):
        with store.writes.locked(cid) as tx:
            batch, calls = [], []
            for turn in range(start, min(start + 500, turns)):
                batch.extend(_turn(cid, turn, now, calls))
            tx.put_tool_calls(calls)
            tx.append_and_fold(batch, now=now)


def _turn(cid: str, turn: int, now: datetime, calls: list) -> list:
    turn_id, first, second = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    call_id = f"call_prefill_{turn}"
    calls.append(ToolCallRecord(
        conversation_id=cid, id=call_id, name="noop", executor="server", status="done", args={},
        round_id=first, turn_id=turn_id, created_at=now, result={"status": "ok", "output": "ok"},
        resolved_at=now,
    ))
    common = dict(turn_id=turn_id, created_at=now)
    return [
        drafts.user_msg(f"question {turn}", message_id=str(uuid.uuid4()),
                        scope=SCOPE.to_json(), **common),
        drafts.assistant_msg("", round_id=first, step_key=f"prefill-{turn}-a", **common),
        drafts.tool_call(call_id, "noop", {}, executor="server", expires_at=None,
                         round_id=first, step_key=f"prefill-{turn}-a", **common),
        drafts.tool_result(call_id, "ok", "ok", round_id=first, step_key=None, **common),
        drafts.assistant_msg("ok", round_id=second, step_key=f"prefill-{turn}-b", **common),
    ]


def summarize_all_but_last(store, cid: str, keep_turns: int) -> None:
    """The summary a compactor would have left: everything before the last turns."""
    events = store.log.list_events(cid)
    starts = [e.seq for e in events if e.type == "user_msg"]
    if len(starts) <= keep_turns:
        return
    with store.writes.locked(cid) as tx:
        tx.save_summary(
            from_seq=1, to_seq=starts[-keep_turns] - 1,
            content={"text": f"{len(starts) - keep_turns} earlier turns, each a no-op tool call."},
            version=1, now=datetime.now(timezone.utc),
        )


def measure(db_url: str, turns: int, measured: int, compaction: bool) -> tuple[float, float, float]:
    """Milliseconds (median), CPU milliseconds of this process (mean) and rows read per step
    over `measured` real turns after `turns`."""
    runtime = build_runtime(Config(database_url=db_url, redis_url="embedded://bench-history"))
    commands = Commands(runtime.store, runtime.registry)
    settings = {"script": SCRIPT, "script_repeat": True, "tools": ["noop"]}
    if compaction:
        settings["compaction"] = {"max_context_tokens": BUDGET, "min_keep_turns": 2}
    cid = commands.create_conversation(SCOPE, settings).id
    prefill(runtime.store, cid, turns)
    if compaction:
        summarize_all_but_last(runtime.store, cid, keep_turns=2)
    rows = [0]

    @event.listens_for(runtime.store.engine, "after_cursor_execute")
    def _count(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("SELECT"):
            rows[0] += max(cursor.rowcount, 0)

    drain(runtime, commands.post_message(cid, "warm up", SCOPE)[1])
    took, cpu = [], 0.0
    rows[0] = 0
    for _ in range(measured):
        _, follow = commands.post_message(cid, "go", SCOPE)
        start, cpu_start = time.perf_counter(), time.process_time()
        drain(runtime, follow)
        took.append((time.perf_counter() - start) / 3)
        cpu += time.process_time() - cpu_start
    read = rows[0] / (3 * measured)
    runtime.store.dispose()
    return 1000 * statistics.median(took), 1000 * cpu / (3 * measured), read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", default="10,1000,10000")
    parser.add_argument("--measure", type=int, default=10)
    args = parser.parse_args()
    marks = [int(x) for x in args.turns.split(",")]
    print("| turns in the log | compaction | ms per step (median) | CPU ms per step (mean) "
          "| rows read per step |")
    print("| --- | --- | --- | --- | --- |")
    with postgres_database() as db_url:
        from agentq.store import Store

        Store.open(db_url).migrate()
        for compaction in (False, True):
            for turns in marks:
                ms, cpu_ms, read = measure(db_url, turns, args.measure, compaction)
                label = f"on ({BUDGET} tokens)" if compaction else "off"
                print(f"| {turns:,} | {label} | {ms:.1f} | {cpu_ms:.1f} | {read:.0f} |", flush=True)


if __name__ == "__main__":
    main()
