"""What streaming an answer costs a green worker and Redis, and how late a reader sees it,
for each delta window (AGENTQ_DELTA_WINDOW_S).

One gevent-patched process plays a worker: `--answers` model calls at once, each the
scripted provider streaming `--pieces` pieces over `--seconds`, through the runtime's
`ModelCall` and `PubSub` on Redis, as a model step streams. A second process subscribes to
every conversation and notes when each piece reaches it. Prints, per window: the worker's
CPU and Redis's CPU per answer, deltas published per answer, and the delay from the
model's piece to the reader (p50, p99, max). The worker's CPU includes the scripted
model's own (waking for each piece); `--pieces 1` shows that floor.

    python bench/deltas.py [--answers 50] [--pieces 300] [--seconds 1.0]
                           [--windows 0,0.02,0.04,0.08,0.16] [--repeat 1]

Redis 127.0.0.1:6379 (a db index of its own, emptied at the end).
"""
from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gevent  # noqa: E402
import redis  # noqa: E402

from agentq.core.request import Message, Request  # noqa: E402
from agentq.core.settings import Settings  # noqa: E402
from agentq.live.announcer import LiveAnnouncer  # noqa: E402
from agentq.live.pubsub import PubSub, channel  # noqa: E402
from agentq.providers.base import CallContext  # noqa: E402
from agentq.providers.scripted import ScriptedProvider, split_text  # noqa: E402
from agentq.runtime.model_call import ModelCall, RoundInfo  # noqa: E402
from agentq.runtime.timers import Timers  # noqa: E402
from bench.places import redis_database  # noqa: E402

REQUEST = Request(system="", messages=(Message(role="user", text="go"),))


def answer_text(pieces: int) -> str:
    return "".join(f"w{n % 100} " for n in range(pieces))


class Timed(ScriptedProvider):
    """The scripted model, noting when it hands each piece over (time.monotonic())."""

    def __init__(self, sent: list[float]) -> None:
        self.sent = sent

    def stream(self, request, ctx, cancel):
        for item in super().stream(request, ctx, cancel):
            self.sent.append(time.monotonic())
            yield item


def listen(url: str, cids: list[str], ready, out) -> None:
    """The reader: every delta's arrival time and text length, per conversation."""
    client = redis.Redis.from_url(url)
    sub = client.pubsub()
    sub.subscribe(*[channel(cid) for cid in cids])
    confirmed = 0
    while confirmed < len(cids):  # subscribed for real before the model starts
        message = sub.get_message(timeout=10.0)
        confirmed += message is not None and message["type"] == "subscribe"
    ready.set()
    got: dict[str, list[tuple[float, int]]] = {cid: [] for cid in cids}
    by_channel = {channel(cid).encode(): cid for cid in cids}
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 30:  # a lost stop ends it too
        message = sub.get_message(timeout=1.0)
        if message is None:
            continue
        quiet_since = now = time.monotonic()
        body = json.loads(message["data"])
        if body["kind"] == "stop":
            break
        if body["kind"] == "delta":
            got[by_channel[message["channel"]]].append((now, len(body["data"]["text"])))
    out.put(got)


def delays(sent: list[float], got: list[tuple[float, int]], piece_chars: list[int]) -> list[float]:
    """For each piece, when the delta carrying its last character arrived minus when the
    model handed it over."""
    out, chars, piece, covered = [], 0, 0, 0
    for arrived, length in got:
        chars += length
        while piece < len(piece_chars) and covered + piece_chars[piece] <= chars:
            covered += piece_chars[piece]
            out.append(arrived - sent[piece])
            piece += 1
    return out


def run(url: str, args, window_s: float) -> dict:
    pubsub = PubSub(url)
    timers = Timers()
    cids = [uuid.uuid4().hex for _ in range(args.answers)]
    text = answer_text(args.pieces)
    settings = Settings(script=[{"text": text, "chunks": args.pieces, "delay_s": args.seconds}])
    piece_chars = [len(p) for p in split_text(text, args.pieces)]
    spawn = multiprocessing.get_context("spawn")  # the reader does not inherit gevent's patches
    ready, out = spawn.Event(), spawn.Queue()
    reader = spawn.Process(target=listen, args=(url, cids, ready, out))
    reader.start()
    ready.wait(30)
    sent: dict[str, list[float]] = {cid: [] for cid in cids}

    def one(cid: str) -> None:
        call = ModelCall(Timed(sent[cid]), LiveAnnouncer(pubsub),
                         lambda step_key: None, timers=timers, max_attempts=1, delta_window_s=window_s)
        ctx = CallContext(conversation_id=cid, step_key=f"{cid}:1", round_id=cid, attempt=1,
                          rounds_committed=0, settings=settings)
        call.run(REQUEST, ctx, RoundInfo(cid, "t", cid, f"{cid}:1"), threading.Event(),
                 timeout_s=600)

    admin = redis.Redis.from_url(url)
    redis_before = _redis_cpu(admin)
    cpu_before = _cpu()
    started = time.monotonic()
    gevent.joinall([gevent.spawn(one, cid) for cid in cids], raise_error=True)
    wall_s = time.monotonic() - started
    cpu_s = _cpu() - cpu_before
    redis_s = _redis_cpu(admin) - redis_before
    admin.publish(channel(cids[0]), json.dumps({"kind": "stop", "data": {}}))  # after all
    got = out.get(timeout=60)
    reader.join(30)
    waits = sorted(d for cid in cids for d in delays(sent[cid], got[cid], piece_chars))
    assert waits, f"the reader saw {sum(len(g) for g in got.values())} deltas"
    published = sum(len(got[cid]) for cid in cids)
    return {
        "window_s": window_s, "answers": args.answers, "pieces": args.pieces,
        "seconds": args.seconds, "wall_s": wall_s,
        "worker_ms_per_answer": 1000 * cpu_s / args.answers,
        "redis_ms_per_answer": 1000 * redis_s / args.answers,
        "deltas_per_answer": published / args.answers,
        "delay_ms": {"p50": 1000 * statistics.median(waits),
                     "p99": 1000 * waits[int(0.99 * (len(waits) - 1))],
                     "max": 1000 * waits[-1]},
        "load1": os.getloadavg()[0],
    }


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=50)
    parser.add_argument("--pieces", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--windows", default="0,0.02,0.04,0.08,0.16")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    windows = [float(w) for w in args.windows.split(",")]
    with redis_database() as url:
        rows = [run(url, args, window) for _ in range(args.repeat) for window in windows]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"{args.answers} answers at once, {args.pieces} pieces over {args.seconds} s each")
    print("| window s | deltas/answer | worker CPU ms/answer | Redis CPU ms/answer | "
          "reader delay p50 / p99 / max ms | load1 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        d = r["delay_ms"]
        print(f"| {r['window_s']} | {r['deltas_per_answer']:.1f} | "
              f"{r['worker_ms_per_answer']:.2f} | {r['redis_ms_per_answer']:.2f} | "
              f"{d['p50']:.1f} / {d['p99']:.1f} / {d['max']:.1f} | {r['load1']:.1f} |")


if __name__ == "__main__":
    main()
