"""What a turn's timeline costs: a turn of 201 steps (50 rounds that each call three tools,
then an answer) on PostgreSQL, read through the API and drawn by the page in headless Chromium.

1. GET /v1/conversations/{id}/turns/{turn}/timeline in the app's own process (no network):
   p50/p99 over --reads reads, and the SQL statements one read runs.
2. The page: from opening #/timeline/{id}/{turn} to the chart laid out (the fetch, the
   drawing and the layout), p50 over --renders loads, in Chromium from /usr/bin, against the
   app served on a loopback port; skipped when Chromium or selenium is missing.

    python bench/timeline.py [--rounds 50] [--tools 3] [--reads 50] [--renders 10]

Needs PostgreSQL (127.0.0.1:5432); the database it creates is dropped at the end.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import event  # noqa: E402
from werkzeug.serving import WSGIRequestHandler, make_server  # noqa: E402

from agentq.store import Store  # noqa: E402
from bench.places import postgres_database  # noqa: E402
from tests.support.api import Api  # noqa: E402

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
# Open the turn's timeline and wait for the chart to be drawn and laid out: the elapsed ms.
RENDER = """
const [hash, done] = [arguments[0], arguments[arguments.length - 1]];
const started = performance.now();
location.hash = hash;
const look = () => {
  const chart = document.querySelector('#timeline[data-state=ended] .tl-chart');
  if (chart) { void chart.getBoundingClientRect(); done(performance.now() - started); }
  else requestAnimationFrame(look);
};
requestAnimationFrame(look);
"""


class Quiet(WSGIRequestHandler):
    def log_request(self, *args: object) -> None:
        """Not one line per request: the figures are what this prints."""


def a_long_turn(api: Api, headers: dict[str, str], rounds: int, tools: int) -> tuple[str, str]:
    """A conversation whose one turn takes rounds * (tools + 1) + 1 steps: its id and the
    turn's."""
    again = {"text": "again", "tool_calls": [{"name": "get_weather", "args": {"city": f"c{i}"}}
                                              for i in range(tools)]}
    cid = api.create(headers, script=[again] * rounds + [{"text": "done"}],
                     limits={"max_rounds_per_turn": rounds + 1})
    api.say(cid, "go", headers)
    api.run()
    state = api.store.conversations.load(cid).fsm
    assert state.state == "idle" and state.rounds == rounds + 1, state
    return cid, api.store.log.list_events(cid)[0].turn_id


def api_reads(api: Api, headers: dict[str, str], path: str, reads: int) -> dict[str, float]:
    seen: list[str] = []
    count = lambda *args: seen.append(args[2])  # noqa: E731 - before_cursor_execute's statement
    event.listen(api.store.engine, "before_cursor_execute", count)
    first = api.client.get(path, headers=headers)
    event.remove(api.store.engine, "before_cursor_execute", count)
    assert first.status_code == 200, first.json
    times = []
    for _ in range(reads):
        started = time.perf_counter()
        assert api.client.get(path, headers=headers).status_code == 200
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"steps": len(first.json["steps"]), "statements": len(seen),
            "p50_ms": statistics.median(times), "p99_ms": times[int(len(times) * 0.99) - 1],
            "bytes": len(first.data)}


def page_renders(api: Api, key: str, cid: str, turn: str, renders: int) -> list[float] | None:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        return None
    server = make_server("127.0.0.1", 0, api.app, threaded=True, request_handler=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        driver.set_script_timeout(60)
        url = f"http://127.0.0.1:{server.server_port}/ui/"
        driver.get(url)
        driver.execute_script("sessionStorage.setItem('agentq.key', arguments[0])", key)
        times = []
        for _ in range(renders):
            driver.get(url + "#/conversations")  # away, so each load draws afresh
            times.append(driver.execute_async_script(RENDER, f"#/timeline/{cid}/{turn}"))
        return sorted(times)
    finally:
        driver.quit()
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--tools", type=int, default=3, help="tool calls per round")
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--renders", type=int, default=10)
    args = parser.parse_args()
    with postgres_database() as url:
        store = Store.open(url)
        store.migrate()
        try:
            api = Api(store)
            headers = api.key("bench", "ada")
            started = time.perf_counter()
            cid, turn = a_long_turn(api, headers, args.rounds, args.tools)
            steps = args.rounds * (args.tools + 1) + 1
            print(f"built a turn of {steps} steps in {time.perf_counter() - started:.1f} s")
            path = f"/v1/conversations/{cid}/turns/{turn}/timeline"
            read = api_reads(api, headers, path, args.reads)
            print(f"API  steps={read['steps']} statements/read={read['statements']} "
                  f"answer={read['bytes'] / 1024:.0f} KiB p50={read['p50_ms']:.1f} ms "
                  f"p99={read['p99_ms']:.1f} ms ({args.reads} reads)")
            key = headers["Authorization"].split(" ", 1)[1]
            drawn = page_renders(api, key, cid, turn, args.renders)
            if drawn is None:
                print("page: skipped (no Chromium or selenium)")
            else:
                print(f"page open→laid out p50={statistics.median(drawn):.0f} ms "
                      f"max={max(drawn):.0f} ms ({args.renders} loads)")
        finally:
            store.dispose()


if __name__ == "__main__":
    main()
