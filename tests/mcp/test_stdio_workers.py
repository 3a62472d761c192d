"""A stdio MCP server (the SDK's, tests/support/mcp_server.py) started by its policy command
on real workers: the Procfile's gevent model worker with its threads tool worker, and one
gevent worker that takes every queue. The model is offered the server's tools, a tool step
calls one, the answer comes back. Under `agentq dev`: tests/cli/test_dev.py."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentq.commands import Commands
from agentq.core.scope import Scope
from agentq.tenancy.policy import load_policy
from agentq.tools import Registry
from agentq.worker.tasks import enqueue
from tests.support.emulators import OpenAIEmulator
from tests.support.mcp_servers import a_model_that_uses, emulated_model_policy
from tests.support.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="acme", user="u1")
# `python` is the worker's own interpreter; the path is the worker's working directory's (ROOT)
LOCAL = '[mcp.local]\ncommand = ["python", "tests/support/mcp_server.py", "stdio"]\n'
PROCFILE = {"model": ("gevent", "agentq.model"), "tools": ("threads", "agentq.tools")}
ONE_GREEN_WORKER = {"green": ("gevent", None)}


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIEmulator]:
    with OpenAIEmulator() as emulator:
        emulator.default = a_model_that_uses("mcp__local__greet", {"name": "Ada"})
        yield emulator


@pytest.mark.parametrize("processes", [PROCFILE, ONE_GREEN_WORKER], ids=["procfile", "gevent"])
def test_a_stdio_server_is_listed_for_the_model_and_called_by_a_tool_step(
        processes, model, pg_store_clean, broker, workers, tmp_path, monkeypatch):
    store = pg_store_clean
    policy = tmp_path / "policy.toml"
    policy.write_text(emulated_model_policy(model.base_url, LOCAL))
    monkeypatch.setenv("EMU_KEY", model.api_key)
    commands = Commands(store, Registry.from_modules([]), policy=load_policy(str(policy)))
    conv = commands.create_conversation(SCOPE, {"profile": "emu", "model": "emu-model-1",
                                                "tools": ["mcp:local"]})
    started = [workers(name, pool=pool, queues=queues, AGENTQ_POLICY=str(policy),
                       EMU_KEY=model.api_key) for name, (pool, queues) in processes.items()]
    enqueue(broker, commands.post_message(conv.id, "Greet Ada.", SCOPE)[1])
    wait_for(lambda: store.conversations.load(conv.id).fsm.rounds == 2, timeout_s=90,
             what=lambda: "the answer; logs:\n" + "\n".join(w.log_text() for w in started))
    events = store.log.list_events(conv.id)
    assert [e.type for e in events] == ["user_msg", "assistant_msg", "tool_call", "tool_result",
                                        "assistant_msg"]
    assert events[3].content["status"] == "ok" and events[3].content["output"] == "Hello, Ada!"
    assert events[-1].content["text"] == "The tool said: Hello, Ada!"
    assert store.conversations.load(conv.id).fsm.state == "idle"
