"""The floor under a step: what a Celery task that does the least a durable step must costs.

A step in agentq is a Celery task on the default deployment's worker (gevent, acks late,
batched task events for Flower) that reads and writes PostgreSQL and sends the next task.
This runs K chains of L hops on that same worker set-up (`agentq.worker.factory.celery_app`),
each hop one `INSERT` committed (autocommit, one round trip) and the next hop sent, and
prints the CPU each hop costs (the worker, the run's PostgreSQL backends, Redis), to set
beside bench/capacity.py's CPU per step: no step costs less than its hop here. A peer that
is not a task per step is not held to this floor.

    python bench/floor.py [--chains 50] [--hops 90] [--workers 2] [--pool gevent]
                          [--concurrency 1000] [--no-events] [--reads 0]
                          [--setting NAME=JSON ...]

`--reads N` adds N one-row reads to each hop (a step's loads); `--no-events` runs the
worker without task events (what Flower shows); `--setting NAME=JSON` sets any other Celery
setting of the workers (repeatable), to measure what it buys.
PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); the database is dropped at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentq.worker.factory import celery_app  # noqa: E402

QUEUE = "agentq.floor"
DONE = "agentq:floor:done"

app = celery_app("agentq_floor")
app.conf.update(broker_url=os.environ.get("FLOOR_BROKER_URL", "memory://"),
                task_default_queue=QUEUE,
                worker_send_task_events=os.environ.get("FLOOR_EVENTS", "1") == "1")
app.conf.update(json.loads(os.environ.get("FLOOR_SETTINGS", "{}")))  # --setting
_engine = None


def engine():
    """One engine per worker process, made as agentq makes its own."""
    global _engine
    if _engine is None:
        from agentq.store.engine import create_engine

        _engine = create_engine(os.environ["FLOOR_DATABASE_URL"])
    return _engine


@app.task(name="agentq.floor.hop", shared=False)
def hop(chain: int, n: int, hops: int, reads: int) -> None:
    from agentq.store.engine import begin_read, begin_write

    for _ in range(reads):
        with begin_read(engine(), one_snapshot=False) as conn:
            conn.exec_driver_sql("SELECT n FROM floor_hops WHERE chain = %s ORDER BY n DESC LIMIT 1",
                                 (chain,)).first()
    with begin_write(engine(), one_statement=True) as conn:
        conn.exec_driver_sql("INSERT INTO floor_hops (id, chain, n) VALUES (%s, %s, %s)",
                             (uuid.uuid4().hex, chain, n))
    if n + 1 < hops:
        hop.apply_async((chain, n + 1, hops, reads), queue=QUEUE)
    else:
        with app.connection_for_write() as conn:
            conn.default_channel.client.rpush(DONE, chain)


def run(args) -> dict:
    import redis

    from agentq.store.engine import create_engine
    from bench.capacity import CpuMeter
    from bench.places import postgres_database, redis_database

    with postgres_database() as db_url, redis_database() as broker_url, \
            tempfile.TemporaryDirectory() as logs:
        db = create_engine(db_url)
        with db.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE floor_hops (id TEXT PRIMARY KEY, chain INT, n INT)")
            conn.exec_driver_sql("CREATE INDEX ON floor_hops (chain, n)")
        env = dict(os.environ, FLOOR_BROKER_URL=broker_url, FLOOR_DATABASE_URL=db_url,
                   FLOOR_EVENTS="0" if args.no_events else "1", PYTHONPATH=str(ROOT),
                   FLOOR_SETTINGS=json.dumps(dict(args.setting)))
        workers = [_Worker(env, Path(logs) / f"w{i}.log", i, args) for i in range(args.workers)]
        reply = redis.Redis.from_url(broker_url, socket_timeout=None)
        app.conf.broker_url = broker_url
        try:
            _chains(reply, 4, 3, args.reads, timeout_s=60)  # the workers are up and warm
            meter = CpuMeter(db, reply, workers)
            meter.start()
            load_before = os.getloadavg()[0]
            start = time.perf_counter()
            _chains(reply, args.chains, args.hops, args.reads, timeout_s=args.timeout)
            wall_s = time.perf_counter() - start
            cpu = meter.since_start()
        finally:
            for worker in workers:
                worker.stop()
            reply.close()
            db.dispose()
    hops = args.chains * args.hops
    return {"hops_per_s": hops / wall_s,
            "cpu_ms_per_hop": {part: 1000 * s / hops for part, s in cpu.items()},
            "cpu_ms_per_hop_total": 1000 * sum(cpu.values()) / hops,
            "load1": [load_before, os.getloadavg()[0]]}


def _chains(reply, chains: int, hops: int, reads: int, *, timeout_s: float) -> None:
    """Start `chains` chains of `hops` hops and wait until every one has ended."""
    reply.delete(DONE)
    for chain in range(chains):
        hop.apply_async((chain, 0, hops, reads), queue=QUEUE)
    for _ in range(chains):
        if reply.blpop([DONE], timeout=timeout_s) is None:
            raise TimeoutError("a chain did not end")


class _Worker:
    """One `celery worker` for the floor's app in its own process group."""

    def __init__(self, env: dict[str, str], log: Path, index: int, args) -> None:
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "bench.floor:app", "worker", "-Q", QUEUE,
                 "-P", args.pool, "-c", str(args.concurrency), "-n", f"floor{index}@%h",
                 "--without-mingle", "--without-gossip", "-l", "WARNING"],
                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid

    def stop(self) -> None:
        os.killpg(self.pid, 15)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, 9)
            self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=50)
    parser.add_argument("--hops", type=int, default=90)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pool", default="gevent")
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--reads", type=int, default=0)
    parser.add_argument("--no-events", action="store_true")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--setting", type=_setting, action="append", default=[],
                        help="a Celery setting for the workers, NAME=JSON (repeatable)")
    args = parser.parse_args()
    result = run(args)
    cpu = result["cpu_ms_per_hop"]
    print("| hop | hops/s | CPU ms/hop: workers + postgres + redis = total | load1 before, after |")
    print("| --- | --- | --- | --- |")
    what = (f"{args.workers} x -P {args.pool} -c {args.concurrency}, events "
            f"{'off' if args.no_events else 'on'}, {args.reads} read(s) + 1 write"
            + "".join(f", {name}={value!r}" for name, value in args.setting))
    print(f"| {what} | {result['hops_per_s']:.1f} | {cpu['workers']:.2f} + {cpu['postgres']:.2f}"
          f" + {cpu['redis']:.2f} = {result['cpu_ms_per_hop_total']:.2f} | "
          f"{result['load1'][0]:.2f}, {result['load1'][1]:.2f} |")


def _setting(text: str) -> tuple[str, object]:
    name, _, value = text.partition("=")
    return name, json.loads(value)


if __name__ == "__main__":
    main()
