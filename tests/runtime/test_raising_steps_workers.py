"""No failure hides (inv. 12) on real worker processes of every pool the Procfile and the
suite use: a model step whose MCP server raises in the worker's event loop while its tools
are listed fails its turn within its attempts, with an `error` event naming the cause.
`agentq dev`'s embedded worker: tests/cli/test_dev.py."""
from __future__ import annotations

import pytest

from agentq.cli.check import check_conversation
from agentq.commands import Commands
from agentq.core.keys import MODEL_STEP
from agentq.core.scope import Scope
from agentq.tenancy.policy import load_policy
from agentq.tools import Registry
from agentq.worker.tasks import enqueue
from tests.support.processes import wait_for
from tests.support.raising_server import BROKEN, CAUSE

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="acme", user="u1")
MAX_ATTEMPTS = 2
HOOK = "agentq.tools.demo,tests.support.tools_for_tests,tests.support.raising_tool_server"


@pytest.mark.parametrize("pool", ["gevent", "threads", "prefork"])
def test_a_model_step_whose_server_raises_in_the_workers_event_loop_fails_its_turn(
        pool, pg_store_clean, broker, workers, beat, tmp_path):
    store = pg_store_clean
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[mcp.{BROKEN}]\nurl = "http://127.0.0.1:9/mcp"\n')
    commands = Commands(store, Registry.from_modules([]), policy=load_policy(str(policy)))
    conv = commands.create_conversation(SCOPE, {"tools": [f"mcp:{BROKEN}"],
                                                "script": [{"text": "hi"}]})
    env = {"AGENTQ_POLICY": str(policy), "AGENTQ_TOOLS": HOOK,
           "AGENTQ_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}
    worker = workers(f"{pool}1", pool=pool, **env)
    beat(**env)
    enqueue(broker, commands.post_message(conv.id, "hello", SCOPE)[1])
    wait_for(lambda: store.conversations.load(conv.id).fsm.state != "running", timeout_s=90,
             what=lambda: f"the turn to end; worker log:\n{worker.log_text()}")
    events = store.log.list_events(conv.id)
    assert [e.type for e in events] == ["user_msg", "error"]
    error = events[-1].content
    assert error["code"] == "max_attempts" and f"TypeError: {CAUSE}" in error["message"]
    assert store.conversations.load(conv.id).fsm.state == "failed"
    (step,) = store.steps.list_of(conv.id)
    assert (step.kind, step.status, step.attempts, step.faults) == (
        MODEL_STEP, "failed_permanent", MAX_ATTEMPTS, MAX_ATTEMPTS)
    assert check_conversation(store, conv.id) == []
    tracebacks = [line for line in worker.log_text().splitlines()
                  if line == f"TypeError: {CAUSE}"]  # a traceback's last line
    assert len(tracebacks) == MAX_ATTEMPTS  # logged with its traceback once an attempt
