"""The dev loop of `agentq dev`: keys that outlive restarts, webhooks that reach the developer's
own box, and a banner saying what was loaded.

Why a key file and not a stored API key: stored keys are kept as hashes, so a restart
could not print the secret again. The dev key is the bootstrap key (`dev:<secret>`, what
AGENTQ_API_KEY sets), its secret kept beside the dev database, readable by its owner only.
The dev encryption key (what AGENTQ_ENCRYPTION_KEYS sets, sealing webhook secrets) is kept the
same way, so an endpoint registered before a restart still has its deliveries signed after it.
Webhooks may go to http and loopback URLs here, where the developer owns the box; a process
started any other way keeps the operator's strict defaults.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from agentq.config import Config
from agentq.store.api_keys import new_secret
from agentq.tenancy.keybox import new_encryption_key

DEV_TENANT = "dev"
API_KEY_FILE = "dev-key"  # agentq.db.dev-key, or .agentq-dev-key for a database that is no file
ENCRYPTION_KEY_FILE = "dev-encryption-key"
# What `agentq dev` allows unless the environment says otherwise: a receiver on this machine.
DEV_DEFAULTS = {"AGENTQ_WEBHOOK_ALLOW_HTTP": "on", "AGENTQ_WEBHOOK_ALLOW_LOOPBACK": "on"}


def key_file(database_url: str, name: str = API_KEY_FILE, cwd: str | None = None) -> Path:
    """Where a dev key is kept: beside a SQLite database file, else in the directory."""
    prefix = "sqlite:///"
    if database_url.startswith(prefix) and ":memory:" not in database_url:
        return Path(database_url[len(prefix):].split("?", 1)[0] + f".{name}")
    return Path(cwd or os.getcwd()) / f".agentq-{name}"


def kept_secret(path: Path, make: Callable[[], str]) -> str:
    """The secret kept in `path`; made and written there, readable by its owner only, at first."""
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        secret = ""
    if not secret:
        secret = make()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(secret + "\n")
    return secret


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
    secret = kept_secret(key_file(config.database_url), new_secret)
    return f"{DEV_TENANT}:{secret}", secret


def dev_config(env: Mapping[str, str]) -> tuple[Config, Path | None]:
    """The Config of `agentq dev`, and the file of the dev encryption key if it seals secrets.

    Webhooks may reach http and loopback URLs unless the environment says otherwise, and
    AGENTQ_ENCRYPTION_KEYS, when unset, is the dev encryption key kept beside the database.
    """
    config = Config.from_env({**DEV_DEFAULTS, **{name: value for name, value in env.items() if value}})
    if config.encryption_keys:
        return config, None
    path = key_file(config.database_url, ENCRYPTION_KEY_FILE)
    return config.with_(encryption_keys=kept_secret(path, new_encryption_key)), path


def webhooks_line(config: Config, sealed_in: Path | None) -> str:
    """Where tenants' webhooks may go here, and what seals their secrets."""
    opened = [name for name, allowed in (("http", config.webhook_allow_http),
                                          ("loopback", config.webhook_allow_loopback)) if allowed]
    reach = (f"{' and '.join(opened)} URLs allowed (dev only)" if opened
             else "https URLs of public addresses only")
    seal = f"the dev encryption key in {sealed_in}" if sealed_in else "AGENTQ_ENCRYPTION_KEYS"
    return f"webhooks: {reach}; secrets sealed with {seal}"


def banner(
    *, url: str, database: str, tools: Iterable[str], agents: Iterable[str],
    servers: Iterable[str], profiles: Iterable[str], problems: Iterable[str], webhooks: str,
    secret: str | None, watched: Iterable[str] | None = None,
) -> list[str]:
    """What `agentq dev` says it loaded: the API's URL (first, as scripts read it), then the
    tools, the agents, the MCP servers, the profiles, what is wrong with the policy, how
    webhooks go, the files a reload watches, and the key."""
    lines = [f"agentq dev: API on {url}, worker and sweeper on {database}; Ctrl-C stops"
             + (" (reloads on changes)" if watched is not None else "")]
    lines.append(f"  tools: {', '.join(tools) or 'none (AGENTQ_TOOLS names the modules)'}")
    lines.append(f"  agents: {', '.join(agents) or 'none (agentq.agent(...) in those modules)'}")
    lines.append(f"  mcp servers: {', '.join(servers) or 'none ([mcp.NAME] in the AGENTQ_POLICY file)'}")
    lines.append(f"  profiles: {', '.join(profiles) or 'none'}")
    lines.extend(f"  warning: {problem}" for problem in problems)
    lines.append(f"  {webhooks}")
    if watched is not None:
        lines.append(f"  reloads when these change: {_some(list(watched))}")
    if secret is not None:
        lines.append(f"  API key of tenant {DEV_TENANT}: {secret}")
    return lines


def _some(names: list[str], shown: int = 8) -> str:
    """The first names, and how many more (run from agentq's own checkout, it loads hundreds)."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


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
