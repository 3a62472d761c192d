"""The runtime through real Celery worker processes on the real Redis broker and Postgres."""
from __future__ import annotations

import pytest

from agentq.commands import Commands
from agentq.tools import Registry, Scope
from agentq.worker import create_celery, enqueue
from agentq.config import Config
from tests.processes import WorkerProcess, wait_for, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="u1")


@pytest.fixture
def pg_store(pg_store_clean):
    return pg_store_clean


@pytest.fixture
def broker(redis_url):
    """A Celery app that only sends, on the test run's own Redis database."""
    config = Config(broker_url=redis_url, redis_url=redis_url)
    app = create_celery(config, runtime=lambda: None)
    yield app
    app.close()


@pytest.fixture
def workers(tmp_path, pg_url, redis_url):
    started: list[WorkerProcess] = []

    def start(name: str = "w1", **env_extra: str) -> WorkerProcess:
        env = worker_env(pg_url, redis_url, redis_url, **env_extra)
        worker = WorkerProcess(env, tmp_path / f"{name}.log", name=name).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


def test_a_turn_with_a_server_tool_completes_on_a_real_worker(pg_store, broker, workers):
    commands = Commands(pg_store, Registry.from_modules(["agentq.demo_tools"]))
    conv = commands.create_conversation(SCOPE, {"script": [
        {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}],
         "chunks": 3},
        {"text": "Cold.", "chunks": 2},
    ]})
    worker = workers("w1")
    _, follow = commands.post_message(conv.id, "weather?", SCOPE)
    enqueue(broker, follow)
    wait_for(lambda: pg_store.load_conversation(conv.id).fsm.rounds == 2
             and pg_store.load_conversation(conv.id).fsm.state == "idle",
             timeout_s=60, what=f"the turn to finish; worker log:\n{worker.log_text()}")
    events = pg_store.list_events(conv.id)
    assert [e.type for e in events] == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"
    ]
    rounds = [e.round_id for e in events if e.type == "assistant_msg"]
    assert len(set(rounds)) == 2
    assert events[2].round_id == rounds[0]
    assert {s.status for s in pg_store.list_steps(conv.id)} == {"succeeded"}
