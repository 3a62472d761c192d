"""docker-compose.yml describes the Procfile's processes, plus the services they need.

There is no Docker engine on the test machines, so the file is checked as data: the
services, their commands (the Procfile's, listening on all interfaces), health checks and
start order. `docker compose config` runs too, but only where `docker compose version`
answers; elsewhere, CI included, that one check is skipped.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest
import yaml
from honcho.environ import parse_procfile

from agentq.worker.queues import QUEUES
from tests.support.processes import ROOT
from tests.support.unavailable import unavailable

WORKERS = ("worker-model", "worker-tools", "worker-timers", "worker-webhooks")
PROCESSES = ("web", *WORKERS, "beat", "flower")
COMPOSE_ENV = {"HOST": "0.0.0.0"}  # in a container the port mapping decides who can connect


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def procfile() -> dict[str, str]:
    return dict(parse_procfile((ROOT / "Procfile").read_text()).processes)


def expand(command: str, env: dict[str, str]) -> str:
    """The shell's `${NAME:-default}` expansion, for the forms the Procfile uses."""
    def one(match: re.Match) -> str:
        return env.get(match["name"]) or match["default"]
    expanded = re.sub(r"\$\{(?P<name>\w+):-(?P<default>[^}]*)\}", one, command)
    assert "$" not in expanded, f"unexpanded variable in {command!r}"
    return expanded


def assignments(command: str) -> dict[str, str]:
    """The `NAME=value` words a command line starts with (the environment it adds)."""
    found = {}
    for word in shlex.split(command):
        name, sep, value = word.partition("=")
        if not sep or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            break
        found[name] = value
    return found


def as_argv(command: str) -> list[str]:
    argv = shlex.split(command)[len(assignments(command)):]
    return argv[1:] if argv[:1] == ["exec"] else argv


def test_the_procfile_has_its_processes_with_a_worker_per_queue(procfile):
    assert tuple(procfile) == PROCESSES
    taken = [as_argv(expand(procfile[name], {})) for name in WORKERS]
    assert [argv[argv.index("-Q") + 1] for argv in taken] == list(QUEUES)
    assert len({argv[argv.index("-n") + 1] for argv in taken}) == len(WORKERS)  # a node name each


def test_every_process_runs_with_the_procfiles_command(compose, procfile):
    services = compose["services"]
    migrate, web = expand(procfile["web"], COMPOSE_ENV).split(" && ")
    assert services["migrate"]["command"] == as_argv(migrate)
    assert services["web"]["command"] == as_argv(web)
    for name in (*WORKERS, "beat", "flower"):
        assert services[name]["command"] == as_argv(expand(procfile[name], COMPOSE_ENV)), name


def test_the_api_and_flower_listen_on_all_interfaces_on_their_published_ports(compose):
    services = compose["services"]
    assert "0.0.0.0:8000" in services["web"]["command"] and services["web"]["ports"] == ["8000:8000"]
    assert "--address=0.0.0.0" in services["flower"]["command"]
    assert "--port=5555" in services["flower"]["command"]
    assert services["flower"]["ports"] == ["5555:5555"]


def test_every_agentq_service_waits_for_the_migration_and_healthy_services(compose):
    services = compose["services"]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in PROCESSES:
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }, name


def test_the_services_others_wait_on_have_health_checks(compose):
    services = compose["services"]
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "/readyz" in services["web"]["healthcheck"]["test"][-1]
    assert "/healthcheck" in services["flower"]["healthcheck"]["test"][-1]
    for name in WORKERS:  # each pings its own node
        node = services[name]["command"][services[name]["command"].index("-n") + 1]
        check = services[name]["healthcheck"]["test"][-1]
        assert "inspect ping" in check and node.replace("%h", "$$HOSTNAME") in check, name


def test_every_agentq_service_gets_the_same_database_broker_and_pubsub(compose):
    services = compose["services"]
    envs = [services[name]["environment"] for name in ("migrate", *PROCESSES)]
    assert all(env == envs[0] for env in envs)
    assert envs[0]["AGENTQ_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert expand(envs[0]["AGENTQ_BROKER_URL"], {}).startswith("redis://redis:6379/")
    assert envs[0]["AGENTQ_REDIS_URL"].startswith("redis://redis:6379/")


def test_rabbitmq_is_a_broker_to_opt_into_and_pubsub_stays_on_redis(compose):
    services = compose["services"]
    assert services["rabbitmq"]["profiles"] == ["rabbitmq"]  # not started unless asked for
    assert services["rabbitmq"]["healthcheck"]["test"][:2] == ["CMD", "rabbitmq-diagnostics"]
    env = services["web"]["environment"]
    rabbit = expand(env["AGENTQ_BROKER_URL"], {"AGENTQ_BROKER_URL": "amqp://agentq:agentq@rabbitmq:5672/agentq"})
    assert rabbit.startswith("amqp://") and env["AGENTQ_REDIS_URL"].startswith("redis://")
    user = services["rabbitmq"]["environment"]
    header = (ROOT / "docker-compose.yml").read_text().split("\nx-agentq-env")[0]
    assert (f"AGENTQ_BROKER_URL=amqp://{user['RABBITMQ_DEFAULT_USER']}:{user['RABBITMQ_DEFAULT_PASS']}"
            f"@rabbitmq:5672/{user['RABBITMQ_DEFAULT_VHOST']} docker compose --profile rabbitmq up") in header


def test_the_production_examples_turn_the_scripted_provider_and_the_demo_tools_off(compose, procfile):
    from agentq.config import Config

    # The Procfile's processes name a broker, which turns the demo off by default: one
    # default, read alike by its processes and by `agentq policy` in the shell beside them.
    assert not any("AGENTQ_DEMO" in command for command in procfile.values())
    assert Config.from_env({"AGENTQ_BROKER_URL": "redis://127.0.0.1:6379/0"}).demo is False
    assert Config.from_env({}).demo is True
    assert compose["x-agentq-env"]["AGENTQ_DEMO"] == "off"
    operations = (ROOT / "docs" / "operations.md").read_text()
    production = operations[operations.index("## Production"):]
    assert "AGENTQ_DEMO=off" in production


def test_there_is_exactly_one_beat(compose):
    assert compose["services"]["beat"]["deploy"]["replicas"] == 1


@pytest.fixture(scope="module")
def compose_command() -> list[str]:
    """`docker compose` (the plugin) where it answers, else the standalone `docker-compose`."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 timeout=30).returncode == 0:
        return [docker, "compose"]
    if standalone := shutil.which("docker-compose"):
        return [standalone]
    unavailable("`docker compose` or `docker-compose`")


def test_docker_compose_accepts_the_file(compose_command):
    """Compose's own validation (no engine needed); `.ci/run` installs docker-compose."""
    result = subprocess.run([*compose_command, "-f", str(ROOT / "docker-compose.yml"), "config"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)["services"]
    assert set(PROCESSES) | {"postgres", "redis", "migrate"} <= set(resolved)
    assert resolved["worker-model"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_docker_compose_refuses_a_broken_file(compose_command, tmp_path):
    """The check above can fail: compose rejects a condition it does not know."""
    broken = tmp_path / "docker-compose.yml"
    broken.write_text((ROOT / "docker-compose.yml").read_text().replace(
        "service_completed_successfully", "service_finished_somehow"))
    (tmp_path / "Dockerfile").write_text((ROOT / "Dockerfile").read_text())
    result = subprocess.run([*compose_command, "-f", str(broken), "config"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "service_finished_somehow" in result.stderr
