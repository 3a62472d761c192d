"""`agentq chat`, `inspect` and `fork` against a real `agentq dev` process, over HTTP only.

The chat runs in a real pseudo-terminal (pexpect): the person types, answers an approval
and presses Ctrl-C as they would. What the commands did is then checked through the API.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pexpect
import pytest

from tests.support.mcp_servers import mcp_server, policy_text
from tests.support.processes import ROOT, wait_for

pytestmark = pytest.mark.slow  # an `agentq dev` process and a terminal

KEY = "aq_" + secrets.token_urlsafe(24)
WAIT_S = 30  # an upper bound on waiting for a line, never a measure of speed

APPROVAL = [
    {"text": "Paying Bob needs your approval.",
     "tool_calls": [{"name": "approve_payment", "args": {"amount": 20, "to": "Bob"}}],
     "chunks": 3, "delay_s": 0.2},
    {"text": "The payment to Bob was approved. All done.", "chunks": 5, "delay_s": 0.5},
]
QUESTION = [  # the tests' MCP server asks a person to confirm the refund (elicitation)
    {"text": "Asking the CRM.",
     "tool_calls": [{"name": "mcp__crm__confirm_refund", "args": {"order": "o-17", "amount": 5}}]},
    {"text": "Done."},
]
SLOW = [{"text": "A very long answer, one slow word at a time, " * 4, "chunks": 40, "delay_s": 60}]


class DevServer:
    """`agentq dev --port 0` on a temporary SQLite file, in its own process group, with the
    demo tools, an agent defined in code (tests/support/terminal_agents.py) and the tests'
    MCP server as `crm`."""

    def __init__(self, tmp: Path, mcp_url: str) -> None:
        self.log_path = tmp / "dev.log"
        (tmp / "policy.toml").write_text(policy_text(mcp_url, tenants='["cli"]'))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
        env.update(AGENTQ_DATABASE_URL=f"sqlite:///{tmp / 'agentq.db'}", AGENTQ_API_KEY=f"cli:{KEY}",
                   AGENTQ_TOOLS="agentq.tools.demo,tests.support.terminal_agents",
                   AGENTQ_POLICY=str(tmp / "policy.toml"), CRM_TOKEN="Bearer t0ken",
                   PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentq.cli", "dev", "--host", "127.0.0.1", "--port", "0"],
                env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        port = wait_for(self._port, timeout_s=90, what=f"agentq dev to listen; log:\n{self._log()}")
        self.url = f"http://127.0.0.1:{port}"

    def _log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _port(self) -> str | None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"agentq dev exited with {self.proc.returncode}:\n{self._log()}")
        found = re.search(r"API on http://127\.0\.0\.1:(\d+)", self._log())
        return found and found.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agentq-dev")
    with mcp_server(tmp / "mcp.log", tmp / "mcp-calls.log") as mcp_url:
        dev = DevServer(tmp, mcp_url)
        try:
            yield dev
        finally:
            dev.stop()


@pytest.fixture
def api(server):
    with httpx2.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"},
                       timeout=10, trust_env=False) as client:
        yield client


def client_env(server: DevServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    # the server's bootstrap form tenant:secret works for the clients too
    env.update(AGENTQ_API_URL=server.url, AGENTQ_API_KEY=f"cli:{KEY}", TERM="dumb", PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def agentq(server: DevServer, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentq.cli", *args], cwd=ROOT, env=client_env(server, **env),
                          capture_output=True, text=True, timeout=60)


class Terminal:
    """`agentq chat …` in a pseudo-terminal; stopped by pid whatever happens."""

    def __init__(self, server: DevServer, *args: str, preexec_fn=None) -> None:
        self.child = pexpect.spawn(sys.executable, ["-m", "agentq.cli", "chat", *args], cwd=str(ROOT),
                                   env=client_env(server), encoding="utf-8", timeout=WAIT_S,
                                   dimensions=(50, 200), preexec_fn=preexec_fn)
        self.seen: list[str] = []

    def expect(self, pattern: str) -> str:
        self.child.expect(pattern)
        self.seen.append(self.child.before + self.child.after)
        return self.child.before

    def exit_status(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        return self.child.exitstatus

    def leave(self) -> int:
        """Ctrl-D at the prompt; the chat's exit status."""
        self.child.sendeof()
        return self.exit_status()

    def stop(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


def create(api, script, **settings) -> str:
    answer = api.post("/v1/conversations",
                      json={"settings": {"provider": "scripted", "script": script, **settings}})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def log_of(api, cid: str) -> list[dict]:
    return api.get(f"/v1/conversations/{cid}/events", params={"limit": 1000}).json()["events"]


def idle(api, cid: str) -> bool:
    return api.get(f"/v1/conversations/{cid}").json()["state"] == "idle"


def test_a_whole_turn_with_an_approval_in_the_terminal(server, api, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"provider": "scripted", "script": APPROVAL}))
    term = Terminal(server, "--settings", f"@{settings}")
    try:
        cid = re.search(r"conversation ([0-9a-f-]{36})", term.expect("you> ")).group(1)
        term.child.sendline("Please pay Bob 20 euros")
        shown = term.expect(r"\[a\]pprove / \[r\]eject")
        assert "agent> Paying Bob needs your approval." in shown
        assert "approve_payment(amount=20, to='Bob')" in shown
        term.child.sendline("a")
        answer = term.expect("you> ")
        assert answer.count("The payment to Bob was approved. All done.") == 1  # deltas, not twice
        assert "agent> The payment to Bob was approved. All done." in answer
        assert term.leave() == 0
    finally:
        term.stop()
    events = log_of(api, cid)
    types = [e["type"] for e in events]
    assert types == ["user_msg", "assistant_msg", "tool_call", "suspension", "resolution", "tool_result",
                     "assistant_msg"]
    assert events[0]["content"]["text"] == "Please pay Bob 20 euros"
    resolution = events[4]["content"]
    assert resolution["status"] == "resolved" and resolution["by"] == "cli"
    assert events[5]["content"]["output"] == {"approved": True}
    assert events[-1]["content"] == {**events[-1]["content"], "interrupted": False,
                                     "text": "The payment to Bob was approved. All done."}


def test_a_chat_with_an_agent_defined_in_code_asks_about_its_gated_call_and_takes_edits(server, api):
    term = Terminal(server, "--agent", "refunds")
    try:
        started = term.expect("you> ")
        cid = re.search(r"conversation ([0-9a-f-]{36}) \(agent refunds@1, ", started).group(1)
        term.child.sendline("Refund order A-17")
        shown = term.expect(r"\[a\]pprove / \[e\]dit \{json\} / \[r\]eject \[reason\]")
        assert "refund_order(order='A-17', amount=150) needs your approval" in shown
        term.child.sendline('e {"order": "A-17", "amount": "lots"}')  # does not fit: asked again
        assert "not taken" in term.expect(r"\[r\]eject \[reason\]: ")
        term.child.sendline('e {"order": "A-17", "amount": 120}')
        assert "agent> The refund is done." in term.expect("you> ")
        assert term.leave() == 0
    finally:
        term.stop()
    assert api.get(f"/v1/conversations/{cid}").json()["agent"]["name"] == "refunds"
    events = log_of(api, cid)
    decision = next(e["content"] for e in events if e["type"] == "resolution")
    assert (decision["status"], decision["by"]) == ("approved", "cli")
    assert decision["args"] == {"order": "A-17", "amount": 120}
    assert decision["model_args"] == {"order": "A-17", "amount": 150}
    result = next(e["content"] for e in events if e["type"] == "tool_result")
    assert result["output"] == "refunded 120.00 EUR on order A-17"


def test_a_tool_servers_question_is_asked_in_the_terminal_until_the_reply_fits(server, api):
    cid = create(api, QUESTION, tools=["mcp:crm/confirm_refund"])
    term = Terminal(server, cid)
    try:
        term.expect("you> ")
        term.child.sendline("Refund order o-17")
        shown = term.expect(r"\[d\]ecline / \[c\]ancel: ")
        assert ("mcp__crm__confirm_refund(order='o-17', amount=5) asks: Refund 5 for o-17? "
                "(fields: confirm, note)") in shown
        term.child.sendline('{"confirm": "yes"}')
        shown = term.expect(r"\[d\]ecline / \[c\]ancel: ")
        assert "not taken:" in shown and "'yes' is not of type 'boolean'" in shown
        term.child.sendline('{"confirm": true, "note": "checked"}')
        assert "agent> Done." in term.expect("you> ")
        assert term.leave() == 0
    finally:
        term.stop()
    result = next(e["content"] for e in log_of(api, cid) if e["type"] == "tool_result")
    assert result["output"] == "refunded 5 for o-17 (checked)"


def test_a_chat_attaches_to_an_id_or_starts_from_an_agent_not_both(server):
    done = agentq(server, "chat", "some-id", "--agent", "refunds")
    assert done.returncode == 2 and "--agent and the settings options start a new one" in done.stderr


def _ignore_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@pytest.mark.parametrize("started_by", ["a shell", "a parent that ignores and blocks SIGINT"])
def test_ctrl_c_during_an_answer_interrupts_the_turn_and_at_the_prompt_leaves(server, api, started_by):
    cid = create(api, SLOW)
    term = Terminal(server, cid, preexec_fn=_ignore_ctrl_c if "ignores" in started_by else None)
    try:
        term.expect("you> ")
        term.child.sendline("Tell me everything")
        term.expect("agent> A very")  # deltas: no assistant_msg exists before the cancel writes it
        term.child.sendintr()
        shown = term.expect("you> ")
        assert "interrupting the turn" in shown and "interrupted" in shown
        term.child.sendintr()  # at an empty prompt: leave
        assert term.exit_status() == 0
    finally:
        term.stop()
    last = log_of(api, cid)[-1]
    assert last["type"] == "assistant_msg" and last["content"]["interrupted"] is True
    assert last["content"]["text"].startswith("A very")
    assert idle(api, cid)


def test_attaching_to_a_conversation_that_waits_asks_the_person_at_once(server, api):
    cid = create(api, APPROVAL)
    api.post(f"/v1/conversations/{cid}/messages", json={"content": "pay Bob"})
    wait_for(lambda: api.get(f"/v1/conversations/{cid}").json()["pending"], timeout_s=WAIT_S,
             what="the approval to wait")
    term = Terminal(server, cid)
    try:
        shown = term.expect(r"\[a\]pprove / \[r\]eject")
        assert "the conversation is awaiting_input" in shown and "approve_payment(amount=20, to='Bob')" in shown
        term.child.sendline("r")
        assert "All done." in term.expect("you> ")
        term.child.sendline("/quit")
        assert term.exit_status() == 0
    finally:
        term.stop()
    tool_result = [e for e in log_of(api, cid) if e["type"] == "tool_result"][0]
    assert tool_result["content"]["output"] == {"approved": False}


def test_a_failed_turn_shows_its_error_and_the_prompt_comes_back(server, api):
    cid = create(api, [{"text": "never said", "fail": {"status": 400, "times": 1}}])
    term = Terminal(server, cid)
    try:
        term.expect("you> ")
        term.child.sendline("hello")
        shown = term.expect("you> ")
        assert "· error:" in shown and "the turn failed" in shown and "never said" not in shown
        assert term.leave() == 0
    finally:
        term.stop()
    assert api.get(f"/v1/conversations/{cid}").json()["state"] == "failed"


def test_inspect_prints_every_event_with_its_seq_and_type_by_turn_and_round(server, api):
    cid = create(api, APPROVAL)
    api.post(f"/v1/conversations/{cid}/messages", json={"content": "pay Bob"})
    pending = wait_for(lambda: api.get(f"/v1/conversations/{cid}").json()["pending"], timeout_s=WAIT_S,
                       what="the approval to wait")
    api.post(f"/v1/conversations/{cid}/tool-calls/{pending[0]['tool_call_id']}/resolution",
             json={"status": "resolved", "result": {"approved": True}})
    wait_for(lambda: idle(api, cid), timeout_s=WAIT_S, what="the turn to end")
    events = log_of(api, cid)

    done = agentq(server, "inspect", cid)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"^\s+\d+\s", line)]
    assert [(int(r[0]), r[2]) for r in rows] == [(e["seq"], e["type"]) for e in events]
    assert done.stdout.splitlines()[0] == f"conversation {cid}"
    rounds = {e["round_id"][:8] for e in events if e["round_id"]}
    assert {line.split()[1] for line in done.stdout.splitlines() if line.startswith("  round ")} == rounds
    assert "approve_payment resolved by cli" in done.stdout

    raw = agentq(server, "inspect", cid, "--json")
    assert [json.loads(line) for line in raw.stdout.splitlines()] == events


def test_inspect_turn_prints_each_step_with_its_attempts_and_the_wait_for_a_person(server, api):
    cid = create(api, APPROVAL)
    api.post(f"/v1/conversations/{cid}/messages", json={"content": "pay Bob"})
    pending = wait_for(lambda: api.get(f"/v1/conversations/{cid}").json()["pending"],
                       timeout_s=WAIT_S, what="the approval to wait")
    api.post(f"/v1/conversations/{cid}/tool-calls/{pending[0]['tool_call_id']}/resolution",
             json={"status": "resolved", "result": {"approved": True}})
    wait_for(lambda: idle(api, cid), timeout_s=WAIT_S, what="the turn to end")

    done = agentq(server, "inspect", cid, "--turn", "last")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("turn ") and "took " in lines[0]
    assert len([line for line in lines if line.startswith("  step ")]) == 2  # two model rounds
    assert len([line for line in lines if re.match(r"^    #1 .* done on ", line)]) == 2
    assert any(line.startswith("  call ") and "approve_payment · human · resolved" in line
               for line in lines)
    assert any(line.startswith("    wait ") and "for a person" in line for line in lines)

    tree = agentq(server, "inspect", cid, "--tree")
    assert tree.returncode == 0, tree.stderr
    assert tree.stdout.splitlines()[0].startswith(f"{cid} · idle · ")


def test_fork_prints_the_id_of_a_new_conversation_holding_the_log_up_to_a_turn(server, api):
    cid = create(api, [{"text": "first answer"}, {"text": "second answer"}])
    for text in ("one", "two"):
        api.post(f"/v1/conversations/{cid}/messages", json={"content": text})
        wait_for(lambda: idle(api, cid) and log_of(api, cid)[-1]["type"] == "assistant_msg",
                 timeout_s=WAIT_S, what="the turn to end")
    done = agentq(server, "fork", cid, "--at", "2")
    assert done.returncode == 0, done.stderr
    new_id = done.stdout.strip()
    forked = api.get(f"/v1/conversations/{new_id}")
    assert forked.status_code == 200 and new_id != cid
    assert [e["content"]["text"] for e in log_of(api, new_id)] == ["one", "first answer"]

    inside = agentq(server, "fork", cid, "--at", "1")
    assert inside.returncode == 1
    assert "cannot fork" in inside.stderr and "inside a turn" in inside.stderr


@pytest.mark.parametrize("command", [["inspect", "no-such-id"], ["fork", "no-such-id", "--at", "0"],
                                     ["chat", "no-such-id"]])
def test_an_unknown_conversation_is_a_clear_message_and_exit_code_1(server, command):
    done = agentq(server, *command)
    assert done.returncode == 1
    assert "no conversation no-such-id (not_found, HTTP 404)" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_bad_key_and_a_server_that_is_down_are_clear_messages(server):
    bad_key = agentq(server, "inspect", "x", "--key", "aq_wrong")
    assert bad_key.returncode == 1 and "unknown or revoked api key" in bad_key.stderr
    down = agentq(server, "chat", "--url", "http://127.0.0.1:9")
    assert down.returncode == 1 and "cannot reach the agentq API at http://127.0.0.1:9" in down.stderr
    assert "Traceback" not in bad_key.stderr + down.stderr
