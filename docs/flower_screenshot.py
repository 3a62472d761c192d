"""Reproduce docs/flower-tasks.png: the Procfile's stack, a few turns, Flower's tasks page.

Runs `honcho start` on a fresh PostgreSQL database and a free Redis db (the benchmarks'
places), completes two turns with a server tool and leaves one waiting on a person, then
has headless Chromium take the picture. Every process is stopped at the end.

    .venv/bin/python docs/flower_screenshot.py [--out docs/flower-tasks.png]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.places import postgres_database, redis_database  # noqa: E402
from tests.support.procfile_stack import BIN, ProcfileStack  # noqa: E402
from tests.support.processes import wait_for  # noqa: E402
from tests.deploy.test_procfile import (  # noqa: E402
    APPROVAL,
    WEATHER,
    flower_tasks_of,
    start_turn,
    wait_state,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "flower-tasks.png"))
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args()
    with postgres_database() as database_url, redis_database() as redis_url, \
            tempfile.TemporaryDirectory() as tmp:
        stack = ProcfileStack(database_url, redis_url, Path(tmp) / "honcho.log").start()
        try:
            stack.wait_ready(timeout_s=180)
            take(stack, args.out, args.chromium)
        finally:
            survivors = stack.stop()
    print(f"wrote {args.out}" + (f"; killed survivors {survivors}" if survivors else ""))
    return 0


def take(stack: ProcfileStack, out: str, chromium: str) -> None:
    created = subprocess.run([str(BIN / "agentq"), "keys", "create", "--tenant", "demo"],
                             env=stack.env, cwd=ROOT, capture_output=True, text=True, check=True)
    key = created.stdout.strip().splitlines()[-1]
    for city in ("Oslo", "Paris"):
        script = [{**WEATHER[0], "tool_calls": [{"name": "get_weather", "args": {"city": city}}]},
                  WEATHER[1]]
        wait_state(stack, key, start_turn(stack, key, script, f"Weather in {city}?"), "idle")
    waiting = start_turn(stack, key, APPROVAL, "Pay Bob 20.")
    wait_state(stack, key, waiting, "awaiting_input")
    wait_for(lambda: any(t["state"] == "WAITING" for t in flower_tasks_of(stack, waiting).values()),
             timeout_s=30, what="Flower to show the waiting call")
    subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", "--virtual-time-budget=8000", f"--screenshot={out}",
                    "--window-size=1600,900", stack.flower.replace("//", f"//{stack.flower_login}@") + "/tasks"],
                   check=True, capture_output=True, timeout=120)


if __name__ == "__main__":
    raise SystemExit(main())
