"""The dev loop of `agentq dev`: tool modules imported from the current directory, a key that
outlives restarts, a banner saying what was loaded, and `--reload` on every change.

Why a key file and not a stored API key: stored keys are kept as hashes, so a restart
could not print the secret again. The dev key is the bootstrap key (`dev:<secret>`, what
AGENTQ_API_KEY sets), its secret kept beside the dev database, readable by its owner only.
Why `--reload` restarts a whole child process (watchfiles' `run_process`) instead of
re-importing modules: a tool module's import has effects (a `Tool` per function, clients,
the registry the worker and the API share) that only a fresh process undoes.
"""
from __future__ import annotations

import importlib.util
import os
import shlex
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from agentq.config import Config
from agentq.store.api_keys import new_secret

DEV_TENANT = "dev"
KEY_FILE_SUFFIX = ".dev-key"
OTHER_DATABASES_KEY_FILE = ".agentq-dev-key"  # a dev database that is no SQLite file


class DevSetupError(ValueError):
    """`agentq dev` cannot start as configured; the message says what to change."""


def importable_here(cwd: str | None = None) -> None:
    """Put the current directory first on sys.path, as `python -m` does, so `AGENTQ_TOOLS`
    can name the modules beside the developer."""
    here = os.path.abspath(cwd or os.getcwd())
    if here not in (os.path.abspath(p or ".") for p in sys.path):
        sys.path.insert(0, here)


def key_file(database_url: str, cwd: str | None = None) -> Path:
    """Where the dev key is kept: beside a SQLite database file, else in the directory."""
    prefix = "sqlite:///"
    if database_url.startswith(prefix) and ":memory:" not in database_url:
        return Path(database_url[len(prefix):].split("?", 1)[0] + KEY_FILE_SUFFIX)
    return Path(cwd or os.getcwd()) / OTHER_DATABASES_KEY_FILE


def dev_key(config: Config, given: str | None) -> tuple[str, str | None]:
    """The bootstrap key (`tenant:secret`) and the secret to print (None: not ours to print).

    `--key` wins (`tenant:secret`, or a secret for tenant dev), then AGENTQ_API_KEY, then
    the key file, created on first start.
    """
    if given:
        tenant, sep, secret = given.partition(":")
        return (given, None) if sep and tenant and secret else (f"{DEV_TENANT}:{given}", None)
    if config.api_key:
        return config.api_key, None
    path = key_file(config.database_url)
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        secret = ""
    if not secret:
        secret = new_secret()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(secret + "\n")
    return f"{DEV_TENANT}:{secret}", secret


def load_failure(modules: Sequence[str], exc: BaseException) -> DevSetupError:
    """What to tell a developer whose tool modules did not import."""
    where = os.getcwd()
    if isinstance(exc, ModuleNotFoundError):
        return DevSetupError(
            f"cannot import {exc.name!r} (AGENTQ_TOOLS={','.join(modules)}) from {where} or "
            f"sys.path: is the module's file in this directory, or its package installed?")
    return DevSetupError(f"loading the tool modules {', '.join(modules)} failed: "
                         f"{type(exc).__name__}: {exc}")


def banner(
    *, url: str, database: str, tools: Iterable[tuple[str, str]], agents: Iterable[str],
    profiles: Iterable[str], problems: Iterable[str], secret: str | None, reload: bool = False,
) -> list[str]:
    """What `agentq dev` says it loaded: the API's URL (first, as scripts read it), then the
    tools, the agents, the profiles, what is wrong with the policy, and the key."""
    lines = [f"agentq dev: API on {url}, worker and sweeper on {database}; Ctrl-C stops"
             + (" (reloads on changes)" if reload else "")]
    named = [name if executor == "server" else f"{name} ({executor})" for name, executor in tools]
    lines.append(f"  tools: {', '.join(named) or 'none (AGENTQ_TOOLS names the modules)'}")
    lines.append(f"  agents: {', '.join(agents) or 'none (agentq.agent(...) in those modules)'}")
    lines.append(f"  profiles: {', '.join(profiles) or 'none'}")
    lines.extend(f"  warning: {problem}" for problem in problems)
    if secret is not None:
        lines.append(f"  API key of tenant {DEV_TENANT}: {secret}")
    return lines


def profile_lines(policy, env: Mapping[str, str]) -> list[str]:
    """`scripted (offline)`, `openai (key in OPENAI_API_KEY, not set)`, ..."""
    shown = []
    for profile in policy.profiles.values():
        if profile.kind_of.offline:
            state = "offline"
        else:
            is_set = "set" if env.get(profile.key_variable or "") else "not set"
            state = f"key in {profile.key_variable}, {is_set}"
        shown.append(f"{profile.name} ({state})")
    return shown


def watched_paths(modules: Iterable[str], cwd: str | None = None) -> list[str]:
    """The current directory and the directory of each tool module's file."""
    paths = {os.path.abspath(cwd or os.getcwd())}
    importable_here(cwd)
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue  # the child says why, and a fix in the directory restarts it
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            paths.add(os.path.dirname(os.path.abspath(spec.origin)))
    return sorted(paths)


def free_port(host: str) -> int:
    """A port free now, so every restart of the child listens on the same one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def supervise(config: Config, *, host: str, port: int, key: str | None) -> int:
    """Run `agentq dev` in a child process; start a new one whenever a watched file changes."""
    from watchfiles import PythonFilter, run_process

    port = port or free_port(host)
    argv = [sys.executable, "-m", "agentq.cli", "dev", "--host", host, "--port", str(port),
            "--reloading"]
    if key:
        argv += ["--key", key]
    paths = watched_paths(config.tools)
    print(f"agentq dev --reload: watching {', '.join(paths)}", flush=True)

    def said(changes) -> None:
        changed = sorted({os.path.relpath(path) for _, path in changes})
        print(f"agentq dev --reload: {', '.join(changed)} changed; restarting", flush=True)

    run_process(*paths, target=shlex.join(argv), target_type="command", callback=said,
                watch_filter=PythonFilter(), debounce=400, sigint_timeout=10)
    return 0
