"""The Procfile as shipped, started with operations.md's own command from a shell without the
virtualenv on PATH, on PostgreSQL and Redis, watched through Flower's API with its login.

One stack per module (starting it is most of the cost): the API under gunicorn, a prefork
worker per queue, beat and Flower, on a fresh database that the web process migrates. The
tests talk to it over HTTP only, read the step ledger from the database, and ask Flower's
API what it saw. Every process is stopped by pid at the end, and the module fails if one survives.
"""
from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator

import psycopg
import pytest

from agentq.core.decide import Step
from agentq.core.keys import task_id
from agentq.worker.queues import QUEUES
from tests.support.procfile_stack import BIN, PROCESSES, ProcfileStack
from tests.support.processes import ROOT, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

WEATHER = [
    {"text": "Let me check Oslo.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
    {"text": "It is cold in Oslo."},
]
APPROVAL = [
    {"text": "Paying Bob needs your approval.",
     "tool_calls": [{"name": "approve_payment", "args": {"amount": 20.0, "to": "Bob"}}]},
    {"text": "Paid."},
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, pg_database_factory, redis_url) -> Iterator[ProcfileStack]:
    database_url = pg_database_factory()  # empty: the web process runs `agentq migrate`
    log = tmp_path_factory.mktemp("procfile") / "honcho.log"
    # The Procfile turns the demo off, as production should; these turns are scripted.
    stack = ProcfileStack(database_url, redis_url, log, AGENTQ_SWEEP_S="2", AGENTQ_DEMO="on").start()
    try:
        stack.wait_ready()
        yield stack
    finally:
        survivors = stack.stop()
    assert not survivors, f"processes outlived `honcho start`: {survivors}"


@pytest.fixture(scope="module")
def key(stack: ProcfileStack) -> str:
    """A key made with `agentq keys create` against the stack's database."""
    out = subprocess.run([str(BIN / "agentq"), "keys", "create", "--tenant", "t"], env=stack.env,
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    return out.strip().splitlines()[-1]


def call(stack: ProcfileStack, key: str, method: str, path: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    req = urllib.request.Request(stack.api + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def start_turn(stack: ProcfileStack, key: str, script: list[dict], text: str) -> str:
    status, conversation = call(stack, key, "POST", "/v1/conversations",
                                {"settings": {"provider": "scripted", "script": script}})
    assert status == 201, conversation
    cid = conversation["id"]
    assert call(stack, key, "POST", f"/v1/conversations/{cid}/messages", {"content": text})[0] == 202
    return cid


def wait_state(stack: ProcfileStack, key: str, cid: str, state: str) -> dict:
    def reached():
        body = call(stack, key, "GET", f"/v1/conversations/{cid}")[1]
        return body if body.get("state") == state else None
    return wait_for(reached, timeout_s=60, what=f"{cid} to be {state}; log:\n{stack.log_text()[-3000:]}")


def ledger(stack: ProcfileStack, cid: str) -> list[dict]:
    with psycopg.connect(stack.env["AGENTQ_DATABASE_URL"]) as conn:
        rows = conn.execute("SELECT kind, status, celery_task_id, ref FROM steps "
                            "WHERE conversation_id = %s ORDER BY created_at", (cid,)).fetchall()
    return [{"kind": k, "status": s, "celery_task_id": t, "ref": r} for k, s, t, r in rows]


def flower_tasks_of(stack: ProcfileStack, cid: str) -> dict[str, dict]:
    """Flower's tasks whose arguments name the conversation (Flower searches the args text)."""
    return {tid: task for tid, task in stack.flower_tasks(search=cid, limit="1000").items()
            if f"conversation={cid}" in (task.get("args") or "")}


def test_the_documented_command_runs_every_process_without_the_venv_on_path(stack):
    assert str(BIN) not in stack.env["PATH"].split(os.pathsep)
    assert set(stack.process_pids()) == set(PROCESSES)
    assert " stopped (rc=" not in stack.log_text()  # none ended, e.g. `celery: not found` (127)
    assert stack.get(stack.api + "/readyz")[0] == 200
    sweeps = stack.flower_tasks(taskname="agentq.sweep", state="SUCCESS")
    # beat sent them, the worker of the timers queue ran them
    assert sweeps and all(t["worker"].startswith("timers@") for t in sweeps.values())


def test_flower_answers_on_flower_port_with_the_operators_login_and_only_with_it(stack):
    status, workers = stack.flower_get("/api/workers?refresh=1")
    assert status == 200 and {name.split("@")[0] for name in workers} == {
        "model", "tools", "timers", "webhooks"}
    assert stack.get(stack.flower + "/api/workers")[0] == 401
    assert stack.get(stack.flower + "/api/workers", login="ops:a-wrong-password")[0] == 401


def test_flower_shows_each_queue_and_the_worker_that_takes_it(stack):
    def queues():
        status, body = stack.flower_get("/api/queues/length")
        names = {q["name"] for q in (body or {}).get("active_queues", [])} if status == 200 else set()
        return names if set(QUEUES) <= names else None
    wait_for(queues, timeout_s=30, what="Flower to list agentq's queues")
    status, workers = stack.flower_get("/api/workers?refresh=1")
    assert status == 200
    taken = {name.split("@")[0]: sorted(q["name"] for q in info.get("active_queues", []))
             for name, info in workers.items()}
    assert taken == {"model": ["agentq.model"], "tools": ["agentq.tools"],
                     "timers": ["agentq.timers"], "webhooks": ["agentq.webhooks"]}


def test_flower_shows_a_turns_tasks_by_name_with_readable_args_as_the_ledger_has_them(stack, key):
    cid = start_turn(stack, key, WEATHER, "Weather in Oslo?")
    wait_state(stack, key, cid, "idle")
    steps = ledger(stack, cid)
    assert [(s["kind"], s["status"]) for s in steps] == [
        ("llm", "succeeded"), ("tool", "succeeded"), ("llm", "succeeded")]
    [tool_step] = [s for s in steps if s["kind"] == "tool"]
    call_id = tool_step["ref"]["tool_call_id"]

    def all_finished():
        tasks = flower_tasks_of(stack, cid)
        names = sorted(t["name"] for t in tasks.values())
        done = all(t["state"] == "SUCCESS" for t in tasks.values())
        return tasks if done and names.count("agentq.advance") >= 2 and "agentq.run_tool" in names else None
    tasks = wait_for(all_finished, timeout_s=30, what=f"Flower to see the turn of {cid} finish")

    # the tool step's row names the Celery task that ran it, and Flower saw it succeed
    run_tool = tasks[tool_step["celery_task_id"]]
    assert run_tool["name"] == "agentq.run_tool" and run_tool["state"] == "SUCCESS"
    assert run_tool["args"] == f"tool=get_weather conversation={cid} call={call_id}"
    assert run_tool["worker"].startswith("tools@")  # the worker of the tools queue ran it
    assert tool_step["celery_task_id"] == task_id(Step.tool(cid, call_id).key)
    # the model steps ran in advance tasks: the first sent the tool task, the tool task the next
    advances = {tid: t for tid, t in tasks.items() if t["name"] == "agentq.advance"}
    assert all(t["args"] == f"conversation={cid}" for t in advances.values())
    assert all(t["worker"].startswith("model@") for t in advances.values())
    assert run_tool["parent_id"] in advances
    assert any(t["parent_id"] == tool_step["celery_task_id"] for t in advances.values())
    # each model step's row names the advance task that ran it: the one that sent the
    # tool task, then the one the tool task sent
    first, second = [s["celery_task_id"] for s in steps if s["kind"] == "llm"]
    assert first == run_tool["parent_id"]
    assert advances[second]["parent_id"] == tool_step["celery_task_id"]
    assert set(t["name"] for t in tasks.values()) == {"agentq.advance", "agentq.run_tool"}


def test_a_call_waiting_on_a_person_shows_as_a_waiting_expire_task_in_flower(stack, key):
    cid = start_turn(stack, key, APPROVAL, "Pay Bob 20.")
    [pending] = wait_state(stack, key, cid, "awaiting_input")["pending"]
    call_id = pending["tool_call_id"]
    expire_id = task_id(Step.expire(cid, call_id).key)

    def waiting():
        task = flower_tasks_of(stack, cid).get(expire_id)
        return task if task and task["state"] == "WAITING" else None
    task = wait_for(waiting, timeout_s=30, what=f"Flower to show the expire task of {call_id} WAITING")
    assert task["name"] == "agentq.expire" and task["eta"]
    assert task["args"] == f"tool=approve_payment conversation={cid} call={call_id}"
    assert expire_id in stack.flower_tasks(state="WAITING")  # an operator can filter on it


def test_a_call_answered_before_its_deadline_no_longer_shows_waiting_in_flower(stack, key):
    cid = start_turn(stack, key, APPROVAL, "Pay Bob 20.")
    [pending] = wait_state(stack, key, cid, "awaiting_input")["pending"]
    expire_id = task_id(Step.expire(cid, pending["tool_call_id"]).key)

    def shown(state: str):
        task = flower_tasks_of(stack, cid).get(expire_id)
        return task if task and task["state"] == state else None
    wait_for(lambda: shown("WAITING"), timeout_s=30, what="Flower to show the expire task WAITING")
    answer = call(stack, key, "POST",
                  f"/v1/conversations/{cid}/tool-calls/{pending['tool_call_id']}/resolution",
                  {"status": "approved"})
    assert answer[0] == 200, answer
    task = wait_for(lambda: shown("SETTLED"), timeout_s=30,
                    what="Flower to show the answered call's expire task SETTLED")
    assert task["result"] == "resolved" and task["name"] == "agentq.expire"
    assert expire_id not in stack.flower_tasks(state="WAITING")
