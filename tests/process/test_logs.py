"""Log lines name the conversation, step and round they belong to, as JSON or plain text."""
from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest

import agentq
from agentq.commands import Commands
from agentq.config import Config
from agentq.process.logs import JsonFormatter, PlainFormatter, bind, log_context, use_format
from agentq.live.pubsub import PubSub
from agentq.runtime import Runtime
from agentq.store import Store
from agentq.tools import Registry
from agentq.core.scope import Scope
from agentq.worker.tasks import enqueue
from tests.support.drive import drain
from tests.support.processes import ROOT, stop, wait_for, worker_env

SCOPE = Scope(tenant="t1", user="u1")
tool_log = logging.getLogger("tests.process.test_logs.tool")


@agentq.tool
def note(text: str) -> str:
    """Write a log line from inside a tool call."""
    tool_log.info("noting %s", text)
    return f"noted {text}"


NOTE_SCRIPT = [
    {"text": "Noting.", "tool_calls": [{"name": "note", "args": {"text": "hello"}}]},
    {"text": "Done."},
]


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """Everything agentq and the test tool log at INFO, formatted as JSON into a buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    loggers = [logging.getLogger("agentq"), tool_log]
    previous = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    use_format(logging.getLogger("agentq"), "json")
    yield buffer
    for logger, level in zip(loggers, previous):
        logger.removeHandler(handler)
        logger.setLevel(level)


class ShimmedRuntime(Runtime):
    """Each task in its own log context for its conversation, as agentq.worker's shims run it."""

    def advance(self, conversation_id):
        with log_context(conversation_id=conversation_id):
            return super().advance(conversation_id)

    def run_tool(self, conversation_id, tool_call_id):
        with log_context(conversation_id=conversation_id):
            return super().run_tool(conversation_id, tool_call_id)


def _run_turn(store: Store, script: list[dict]) -> str:
    registry = Registry.from_modules(["tests.process.test_logs"])
    runtime = ShimmedRuntime(store=store, registry=registry, pubsub=PubSub("embedded://test-logs"),
                      config=Config(), sleep=lambda s: None)
    commands = Commands(store, registry)
    conv = commands.create_conversation(SCOPE, {"script": script})
    _, follow = commands.post_message(conv.id, "note hello", SCOPE)
    drain(runtime, follow)
    return conv.id


def test_json_lines_of_a_step_carry_its_conversation_step_key_and_round(sqlite_store, json_lines):
    cid = _run_turn(sqlite_store, NOTE_SCRIPT)
    entries = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    steps = {s.step_key: s for s in sqlite_store.steps.list_of(cid)}
    step_lines = [e for e in entries if e["message"].startswith("step ")]
    assert [(e["step_kind"], e["message"].split(":")[0]) for e in step_lines] == [
        ("llm", "step claimed"), ("llm", "step committed"),
        ("tool", "step claimed"), ("tool", "step committed"),
        ("llm", "step claimed"), ("llm", "step committed"),
    ]
    for entry in step_lines:
        assert {"time", "level", "logger", "message"} <= entry.keys()
        assert entry["conversation_id"] == cid
        step = steps[entry["step_key"]]
        assert entry["step_kind"] == step.kind
        assert entry.get("round_id") == step.round_id
    assert [e["round_id"] for e in step_lines if e["step_kind"] == "llm"][0] is not None


def test_a_tool_logs_with_the_context_of_its_step_from_its_own_thread(sqlite_store, json_lines):
    cid = _run_turn(sqlite_store, NOTE_SCRIPT)
    entries = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    (noted,) = [e for e in entries if e["logger"] == "tests.process.test_logs.tool"]
    (tool_step,) = [s for s in sqlite_store.steps.list_of(cid) if s.kind == "tool"]
    assert noted["message"] == "noting hello"
    assert (noted["conversation_id"], noted["step_key"]) == (cid, tool_step.step_key)


def test_a_failed_step_is_logged_as_a_warning_with_its_status(sqlite_store, json_lines):
    cid = _run_turn(sqlite_store, [{"text": "x", "fail": {"status": 400, "times": 1}}])
    entries = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    (failed,) = [e for e in entries if e["message"].startswith("step failed")]
    assert failed["level"] == "WARNING"
    assert failed["status"] == "failed_permanent"
    assert failed["conversation_id"] == cid and failed["step_kind"] == "llm"


def test_retries_of_a_model_call_are_logged_with_their_step(sqlite_store, json_lines):
    cid = _run_turn(sqlite_store, [{"text": "x", "fail": {"status": 503, "times": 2}}])
    entries = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    retries = [e for e in entries if "retrying" in e["message"]]
    (llm,) = sqlite_store.steps.list_of(cid)
    assert len(retries) == 2 == llm.retries
    assert {e["step_key"] for e in retries} == {llm.step_key}


def test_plain_lines_end_with_the_context_as_key_value_pairs():
    record = logging.LogRecord("agentq.runtime", logging.INFO, __file__, 1, "step claimed", (), None)
    with log_context(conversation_id="c1"):
        bind(step_key="k1", round_id=None)
        line = PlainFormatter().format(record)
    assert line.endswith(" INFO agentq.runtime: step claimed conversation_id=c1 step_key=k1")


def test_outside_a_log_context_binding_a_step_changes_nothing():
    bind(conversation_id="c1", step_key="k1")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
    assert json.loads(JsonFormatter().format(record)).keys() == {"time", "level", "logger", "message"}


def test_a_log_context_ends_with_its_block_taking_what_was_bound_inside_along():
    def context_of_a_line() -> dict:
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
        return json.loads(JsonFormatter().format(record))

    with log_context(conversation_id="c1"):
        bind(step_key="k1")
        inside = context_of_a_line()
    after = context_of_a_line()
    assert (inside["conversation_id"], inside["step_key"]) == ("c1", "k1")
    assert "conversation_id" not in after and "step_key" not in after


def test_an_exception_is_one_json_field_on_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["exception"]


def test_an_unknown_log_format_is_refused_with_the_variable_named():
    with pytest.raises(ValueError, match="AGENTQ_LOG_FORMAT must be one of plain, json"):
        Config.from_env({"AGENTQ_LOG_FORMAT": "xml"})
    assert Config.from_env({"AGENTQ_LOG_FORMAT": "JSON"}).log_format == "json"
    assert Config.from_env({}).log_format == "plain"


@pytest.mark.slow
def test_the_agentq_command_logs_one_json_object_per_line_when_asked(tmp_path):
    env = {**worker_env(f"sqlite:///{tmp_path / 'a.db'}", "memory://", "embedded://"),
           "AGENTQ_LOG_FORMAT": "json"}
    done = subprocess.run([sys.executable, "-m", "agentq.cli", "-v", "migrate"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in done.stderr.splitlines()]
    assert any(e["logger"] == "alembic.runtime.migration" and e["message"].startswith("Running upgrade")
               and e["level"] == "INFO" for e in entries)


@pytest.mark.slow
def test_the_agentq_command_refuses_an_unknown_log_format(tmp_path):
    env = {**worker_env(f"sqlite:///{tmp_path / 'a.db'}", "memory://", "embedded://"),
           "AGENTQ_LOG_FORMAT": "xml"}
    done = subprocess.run([sys.executable, "-m", "agentq.cli", "migrate"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "AGENTQ_LOG_FORMAT must be one of plain, json, got 'xml'" in done.stderr


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.redis
def test_every_line_a_celery_worker_logs_is_json_and_its_steps_carry_their_keys(
    tmp_path, pg_store_clean, pg_url, redis_url, broker  # noqa: F811
):
    store = pg_store_clean
    commands = Commands(store, Registry.from_modules(["agentq.tools.demo"]))
    conv = commands.create_conversation(SCOPE, {"script": [
        {"text": "Checking.", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
        {"text": "Cold."},
    ]})
    log_path = tmp_path / "worker.log"
    # Celery warns about running as root (as tests here do) before any logging is set up.
    env = worker_env(pg_url, redis_url, redis_url, AGENTQ_LOG_FORMAT="json",
                     PYTHONWARNINGS="ignore::Warning:celery.platforms")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "agentq.worker:app", "--quiet", "worker",
             "-P", "threads", "-c", "2", "-n", "logs@%h", "--without-mingle", "--without-gossip",
             "-l", "INFO"],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        _, follow = commands.post_message(conv.id, "weather?", SCOPE)
        enqueue(broker, follow)
        wait_for(lambda: store.conversations.load(conv.id).fsm.rounds == 2
                 and store.conversations.load(conv.id).fsm.state == "idle",
                 timeout_s=60, what=f"the turn to finish; worker log:\n{log_path.read_text()}")
    finally:
        stop(proc)
    # Celery prints (never logs) one notice on SIGTERM; everything else is a log line.
    lines = [line for line in log_path.read_text().splitlines()
             if line.strip() and line != "worker: Warm shutdown (MainProcess)"]
    entries = [json.loads(line) for line in lines]
    keys = {s.step_key: s.kind for s in store.steps.list_of(conv.id)}
    committed = [e for e in entries if e["message"].startswith("step committed")]
    assert sorted(e["step_kind"] for e in committed) == ["llm", "llm", "tool"]
    assert all(e["conversation_id"] == conv.id and keys[e["step_key"]] == e["step_kind"]
               for e in committed)
    assert any(e["logger"].startswith("celery") for e in entries)


@pytest.mark.slow
def test_every_line_gunicorn_logs_for_the_api_is_json_and_metrics_answer_over_http(tmp_path):
    url = f"sqlite:///{tmp_path / 'api.db'}"
    Store.open(url).migrate()
    env = worker_env(url, "memory://", "embedded://", AGENTQ_LOG_FORMAT="json",
                     AGENTQ_METRICS_TOKEN="scrape-secret")
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:  # ./gunicorn.conf.py is read from the working directory
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-k", "gthread", "--threads", "4", "-b", "127.0.0.1:0",
             "--access-logfile", "-", "agentq.web.app:create_app()"],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        port = wait_for(lambda: _listening_port(log_path.read_text()), timeout_s=60,
                        what=f"gunicorn to listen; its log:\n{log_path.read_text()}")
        scrape = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                        headers={"Authorization": "Bearer scrape-secret"})
        text = wait_for(lambda: _get(scrape), timeout_s=60, what="GET /metrics to answer")
    finally:
        stop(proc)
    assert "agentq_inbox_messages 0.0" in text
    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    assert any(e["logger"] == "gunicorn.error" and e["message"].startswith("Starting gunicorn")
               for e in entries)
    assert any(e["logger"] == "gunicorn.access" and '"GET /metrics HTTP/1.1" 200' in e["message"]
               for e in entries)


def _listening_port(log_text: str) -> int | None:
    found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", log_text)
    return int(found.group(1)) if found else None


def _get(request: urllib.request.Request) -> str | None:
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.read().decode()
    except OSError:
        return None
