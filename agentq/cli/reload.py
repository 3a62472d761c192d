"""`agentq dev --reload`: a child `agentq dev`, started again when what it loaded changes.

What it loaded is the tool modules of AGENTQ_TOOLS, the files of the project they import, and
the policy file (AGENTQ_POLICY, where MCP servers are declared): a client script beside them
is none of these, and editing it restarts nothing. Only the child knows what its imports
reached, so it writes the list to a file the watcher reads at each change; until a child has
written it (none has started yet, or the last failed to), any Python file of the project, or
the policy, restarts it.

Why a whole child process (watchfiles' `run_process`) instead of re-importing modules: a tool
module's import has effects (a `Tool` per function, clients, the registry the worker and the
API share) that only a fresh process undoes.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import socket
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from watchfiles import Change, PythonFilter, run_process

from agentq.cli.loading import importable_here
from agentq.config import Config


def project_roots(modules: Iterable[str], cwd: str | None = None) -> list[str]:
    """The current directory and the directory of each tool module's file."""
    roots = {os.path.realpath(cwd or os.getcwd())}
    importable_here(cwd)
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue  # the child says why, and a fix in the directory restarts it
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            roots.add(os.path.dirname(os.path.realpath(spec.origin)))
    return sorted(roots)


def outermost(paths: Iterable[str]) -> list[str]:
    """The directories not inside another of them: a watch of each sees everything once."""
    found = sorted(set(paths))
    return [p for p in found if not any(p.startswith(os.path.join(q, "")) for q in found)]


def loaded_files(config: Config) -> list[str]:
    """The files this process imported from the project (not from an environment kept in it),
    and the policy file."""
    roots = tuple(os.path.join(root, "") for root in project_roots(config.tools))
    environments = tuple(os.path.join(os.path.realpath(p), "") for p in {sys.prefix, sys.base_prefix})
    named = (getattr(module, "__file__", None) for module in list(sys.modules.values()))
    files = {os.path.realpath(name) for name in named if isinstance(name, str)}
    found = {f for f in files if f.startswith(roots) and not f.startswith(environments)}
    if config.policy_path:
        found.add(os.path.realpath(config.policy_path))
    return sorted(found)


def say_loaded(path: str, files: list[str]) -> None:
    """Write the list for the watcher, whole or not at all (it may read at any moment)."""
    partial = f"{path}.partial"
    Path(partial).write_text(json.dumps(files), encoding="utf-8")
    os.replace(partial, path)


class LoadedFiles(PythonFilter):
    """The changes that restart the child: to a file it said it loaded, or, until it said,
    to any Python file or the policy."""

    def __init__(self, said: Path, policy: str | None) -> None:
        super().__init__()
        self.said, self.policy = said, policy
        self._read: tuple[int, frozenset[str]] | None = None  # the list, and its file's mtime

    def __call__(self, change: Change, path: str) -> bool:
        loaded = self.loaded()
        if loaded is None:
            return path == self.policy or super().__call__(change, path)
        return os.path.realpath(path) in loaded

    def loaded(self) -> frozenset[str] | None:
        """What the child said it loaded, read again only when the file changed (the dev
        database is written all the time, in a watched directory)."""
        try:
            mtime = self.said.stat().st_mtime_ns
            if self._read is None or self._read[0] != mtime:
                self._read = mtime, frozenset(json.loads(self.said.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None
        return self._read[1]


def free_port(host: str) -> int:
    """A port free now, so every restart of the child listens on the same one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def supervise(config: Config, *, host: str, port: int, key: str | None) -> int:
    """Run `agentq dev` in a child process; start a new one whenever what it loaded changes."""
    port = port or free_port(host)
    policy = os.path.realpath(config.policy_path) if config.policy_path else None
    paths = outermost(project_roots(config.tools) + ([os.path.dirname(policy)] if policy else []))
    with tempfile.TemporaryDirectory(prefix="agentq-dev-") as tmp:
        said = Path(tmp) / "loaded.json"
        argv = [sys.executable, "-m", "agentq.cli", "dev", "--host", host, "--port", str(port),
                "--reloading", str(said)]
        if key:
            argv += ["--key", key]
        print(f"agentq dev --reload: watching what the server loads from {', '.join(paths)}",
              flush=True)

        def restarting(changes: set[tuple[Change, str]]) -> None:
            said.unlink(missing_ok=True)  # the next child says what it loaded, if it starts
            changed = sorted({os.path.relpath(path) for _, path in changes})
            print(f"agentq dev --reload: {', '.join(changed)} changed; restarting", flush=True)

        run_process(*paths, target=shlex.join(argv), target_type="command",
                    callback=restarting, watch_filter=LoadedFiles(said, policy), debounce=400,
                    sigint_timeout=10)
    return 0
