"""`agentq dev` with the operator's MCP servers (AGENTQ_POLICY): docs/tools.md's server over
stdio, offered to the model and called, and a server that raises in the embedded worker's
event loop, whose turn fails visibly (inv. 12). The processes and fixtures: test_dev.py."""
from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator

import httpx2
import pytest

from tests.cli.test_dev import AGENTQ, WAIT_S, dev, shop  # noqa: F401  (fixtures)
from tests.support.emulators import OpenAIEmulator
from tests.support.mcp_servers import a_model_that_uses, emulated_model_policy
from tests.support.processes import ROOT, wait_for
from tests.support.raising_server import BROKEN, CAUSE
from tests.test_quickstart import block


@pytest.fixture
def model() -> Iterator[OpenAIEmulator]:
    with OpenAIEmulator() as emulator:
        yield emulator


def started_turn(api: httpx2.Client, settings: dict) -> str:
    """A new conversation of `settings` whose first message was posted: its id."""
    created = api.post("/v1/conversations", json={"settings": settings})
    assert created.status_code == 201, created.text
    cid = created.json()["id"]
    assert api.post(f"/v1/conversations/{cid}/messages", json={"content": "go"}).status_code in (201, 202)
    return cid


def test_in_agentq_dev_the_tool_pages_stdio_server_is_offered_to_the_model_and_called(dev, shop, model):
    (shop / "crm_server.py").write_text(block("python crm_server.py", ROOT / "docs" / "tools.md"))
    (shop / "policy.toml").write_text(emulated_model_policy(
        model.base_url, '[mcp.crm]\ncommand = ["python", "crm_server.py"]\n'))
    model.default = a_model_that_uses("mcp__crm__lookup", {"customer": "Ada"})
    process = dev(AGENTQ_POLICY=str(shop / "policy.toml"), EMU_KEY=model.api_key)
    process.wait_banner()
    with process.client() as api:
        cid = started_turn(api, {"profile": "emu", "model": "emu-model-1", "tools": ["mcp:crm"]})

        def answered() -> list | None:
            events = api.get(f"/v1/conversations/{cid}/events").json()["events"]
            return sum(e["type"] == "assistant_msg" for e in events) == 2 and events
        events = wait_for(answered, timeout_s=WAIT_S, what=lambda: f"the answer; output:\n{process.text()}")
    call = next(e["content"] for e in events if e["type"] == "tool_call")
    result = next(e["content"] for e in events if e["type"] == "tool_result")
    assert result["status"] == "ok" and result["output"] == {
        "customer": "Ada", "tier": "gold", "call_id": call["tool_call_id"]}
    assert events[-1]["content"]["text"].startswith("The tool said: ") and "gold" in events[-1]["content"]["text"]


def test_in_agentq_dev_a_step_that_keeps_raising_fails_its_turn_and_its_stream_ends(dev, shop):
    (shop / "policy.toml").write_text(f'[mcp.{BROKEN}]\nurl = "http://127.0.0.1:9/mcp"\n')
    process = dev(AGENTQ_POLICY=str(shop / "policy.toml"), PYTHONPATH=str(ROOT),
                  AGENTQ_TOOLS="shop_tools,tests.support.raising_tool_server",
                  AGENTQ_MAX_ATTEMPTS="2", AGENTQ_LEASE_S="2", AGENTQ_SWEEP_S="1")
    process.wait_banner()
    frames: list[str] = []
    ended = threading.Event()
    with process.client() as api:
        cid = started_turn(api, {"tools": [f"mcp:{BROKEN}"], "script": [{"text": "hi"}]})

        def read_stream() -> None:
            with api.stream("GET", f"/v1/conversations/{cid}/stream", params={"until_idle": 1},
                            timeout=WAIT_S) as stream:
                frames.extend(stream.iter_lines())
            ended.set()
        threading.Thread(target=read_stream, daemon=True).start()
        wait_for(ended.is_set, timeout_s=WAIT_S, what=lambda: f"the stream to end; output:\n{process.text()}")
        events = api.get(f"/v1/conversations/{cid}/events").json()["events"]
    assert [e["type"] for e in events] == ["user_msg", "error"]
    assert f"TypeError: {CAUSE}" in events[-1]["content"]["message"]
    data = [json.loads(line.removeprefix("data:")) for line in frames if line.startswith("data:")]
    assert [d["type"] for d in data if "type" in d] == ["user_msg", "error"]  # then it ended
    assert "event: end" in frames and data[-1] == {"state": "failed", "last_seq": 2}
    checked = subprocess.run([AGENTQ, "check", cid], cwd=shop, capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in os.environ.items()
                                              if not k.startswith("AGENTQ_")})
    assert checked.returncode == 0, checked.stdout + checked.stderr
