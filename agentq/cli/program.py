"""The `agentq` program: migrate, demo, dev, api, keys, tenant-keys, policy, check, and the API
clients chat, inspect, fork.

Loaded by the entry point (agentq.cli.main) once it has patched the process for gevent.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence

from agentq.config import Config
from agentq.process.logs import configure as configure_logging
from agentq.tenancy.policy import PolicyError

DEV_GRACE_S = 0.5  # what `agentq dev`'s embedded worker gets to stop once the API stopped


def _cmd_migrate(config: Config, args: argparse.Namespace) -> int:
    from agentq.store import Store

    store = Store.open(config.database_url)
    store.migrate()
    store.dispose()
    print(f"schema is at head on {_redacted(config.database_url)}")
    return 0


def _cmd_check(config: Config, args: argparse.Namespace) -> int:
    from agentq.cli.check import check_all, check_conversation
    from agentq.store import Store

    store = Store.open(config.database_url)
    try:
        if args.all:
            violations = list(check_all(store))
            scope = "all conversations"
        else:
            violations = check_conversation(store, args.id)
            scope = args.id
    finally:
        store.dispose()
    for violation in violations:
        print(f"VIOLATION {violation}")
    if violations:
        print(f"{len(violations)} violation(s) in {scope}")
        return 1
    print(f"ok: {scope} keep every invariant")
    return 0


def _cmd_demo(config: Config, args: argparse.Namespace) -> int:
    from agentq.cli.demo import run_demo

    return run_demo(config, db_path=args.db)


def _cmd_dev(config: Config, args: argparse.Namespace) -> int:
    if args.reload:
        from agentq.cli.reload import supervise

        return supervise(config, host=args.host, port=args.port, key=args.key)
    import gevent

    from agentq.cli.dev import banner, dev_config, dev_key, profile_lines, webhooks_line
    from agentq.cli.loading import load_tools, server_names, tool_names

    try:
        config, sealed_in = dev_config(os.environ)
        bootstrap, secret = dev_key(config, args.key)
    except OSError as exc:
        print(f"agentq dev: {exc}", file=sys.stderr)
        return 2
    loaded = load_tools("dev", config.tools)  # alone first: what fails is the developer's module
    if loaded is None:
        return 2
    from agentq.web.app import create_app
    from agentq.web.serve import make_server, stopper
    from agentq.web.services import embedded_services
    from agentq.worker.embedded import Embedded
    from agentq.worker.signals import when_shutting_down

    embedded = Embedded(config)
    app = create_app(services=embedded_services(embedded, bootstrap))
    server = make_server(app, host=args.host, port=args.port)
    server.start()
    policy = embedded.commands.policy
    watched = None
    if args.reloading:  # under `--reload`: tell the watcher what this process loaded
        from agentq.cli.reload import loaded_files, say_loaded

        watched = loaded_files(config)
        say_loaded(args.reloading, watched)
    for line in banner(
        url=f"http://{args.host}:{server.server_port}", database=_redacted(config.database_url),
        tools=tool_names(loaded.registry), agents=sorted(loaded.agents.names),
        servers=server_names(policy.mcp), profiles=profile_lines(policy, os.environ),
        problems=policy.unusable(os.environ), webhooks=webhooks_line(config, sealed_in),
        secret=secret, watched=None if watched is None else [os.path.relpath(p) for p in watched],
    ):
        print(line)
    sys.stdout.flush()
    stop_api = stopper(app, server)

    def stop() -> None:
        """The API first (streams end cleanly), then the process, even mid-step.

        A step cut short is like one whose worker was killed: the log and the ledger hold
        it, and the next start takes it over when its lease runs out.
        """
        stop_api()
        gevent.sleep(DEV_GRACE_S)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    when_shutting_down(lambda: gevent.spawn(stop))

    def wait_forever(_: Embedded) -> int:
        embedded.stopping.wait()
        return 0

    try:
        return embedded.run(wait_forever)
    finally:
        stop_api()


def _cmd_api(config: Config, args: argparse.Namespace) -> int:
    from agentq.web.app import create_app
    from agentq.web.serve import serve
    from agentq.web.services import build_services

    return serve(create_app(services=build_services(config)), host=args.host, port=args.port)


def _cmd_keys(config: Config, args: argparse.Namespace) -> int:
    from agentq.process.clock import utcnow
    from agentq.store import Store

    store = Store.open(config.database_url)
    try:
        if args.action == "create":
            if not args.tenant.strip():  # "" owns the agents the code defines: never a tenant
                print("agentq: --tenant names the tenant the key acts for; it may not be empty",
                      file=sys.stderr)
                return 2
            try:
                key_id, secret = store.keys.create(args.tenant, utcnow(), roles=tuple(args.roles))
            except ValueError as exc:
                print(f"agentq: {exc}", file=sys.stderr)
                return 2
            roles = f" with roles {', '.join(args.roles)}" if args.roles else ""
            print(f"key {key_id} of tenant {args.tenant}{roles} (shown once, keep it):\n{secret}")
            return 0
        if args.action == "revoke":
            revoked = store.keys.revoke(args.key_id, utcnow())
            print(f"revoked {args.key_id}" if revoked else f"no unrevoked key {args.key_id}")
            return 0 if revoked else 1
        for key in store.keys.list_all(tenant=args.tenant):
            print(f"{key.id}  {key.tenant}  created {key.created_at:%Y-%m-%d %H:%M}"
                  + (f"  roles {','.join(key.roles)}" if key.roles else "")
                  + ("  revoked" if key.revoked_at else ""))
        return 0
    finally:
        store.dispose()


def _cmd_tenant_keys(config: Config, args: argparse.Namespace) -> int:
    from agentq.process.clock import utcnow
    from agentq.store import Store
    from agentq.tenancy.keybox import new_encryption_key
    from agentq.tenancy.own_keys import OwnKeys
    from agentq.tenancy.policy import Policy

    if args.action == "new-encryption-key":
        print(new_encryption_key())
        return 0
    store = Store.open(config.database_url)
    try:
        own_keys = OwnKeys.from_config(config, store, Policy.from_config(config), utcnow)
        moved = own_keys.reseal_all()
    finally:
        store.dispose()
    print(f"re-sealed {moved} tenant key(s) with the newest encryption key")
    return 0


def _cmd_policy(config: Config, args: argparse.Namespace) -> int:
    from agentq.cli.policy import print_policy

    return print_policy(config)


def _on_the_api(command):
    """Run a client command with its Client; an expected failure is one line on stderr, exit 1."""
    def run(config: Config, args: argparse.Namespace) -> int:
        import os

        from agentq.client import Client, ClientError

        try:
            with Client(args.url, args.key, user=args.user, env=os.environ) as client:
                return command(client, args)
        except ClientError as exc:
            print(f"agentq {args.command}: {exc}", file=sys.stderr)
            return 1
        except ValueError as exc:
            print(f"agentq {args.command}: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
    return run


def _cmd_chat(client, args: argparse.Namespace) -> int:
    from agentq.cli.chat import Chat, parse_settings

    cid = args.id
    options = {"profile": args.profile, "model": args.model, "system": args.system}
    settings = {**parse_settings(args.settings), **{k: v for k, v in options.items() if v is not None}}
    if cid is not None and (args.agent or settings):
        raise ValueError("an id attaches to a conversation as it is: --agent and the settings "
                         "options start a new one")
    if cid is None:  # from the agent, the settings only changing what it lets change
        created = client.create_conversation((settings or None) if args.agent else settings,
                                             agent=args.agent)
        cid = created.id
        agent = f"agent {created.agent.name}@{created.agent.version}, " if created.agent else ""
        print(f"conversation {cid} ({agent}{created.settings.profile}/{created.settings.model})")
    else:
        print(f"conversation {cid}")
    _take_ctrl_c()
    return Chat(client, cid).run()


def _take_ctrl_c() -> None:
    """Make Ctrl-C reach the chat even if whatever started it ignored or blocked SIGINT
    (both are inherited across exec); the chat's interrupt rests on it."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _cmd_inspect(client, args: argparse.Namespace) -> int:
    import json

    from agentq.cli.timeline import header, timeline
    from agentq.client import ApiError

    if args.turn or args.tree:
        return _print_run(client, args)
    conversation = client.get_conversation(args.id).model_dump(mode="json")
    events = (event.model_dump(mode="json") for event in client.iter_events(args.id))
    if args.json:
        for event in events:
            print(json.dumps(event, ensure_ascii=False))
        return 0
    summary = conversation["summary"]
    if summary is not None:
        with contextlib.suppress(ApiError):  # the summary in use, with its version and text
            in_use = client.context(args.id).summary
            summary = summary if in_use is None else in_use.model_dump(mode="json")
    for line in header(conversation, summary):
        print(line)
    for line in timeline(events, summary=summary):
        print(line)
    return 0


def _print_run(client, args: argparse.Namespace) -> int:
    """`inspect --turn T`: the turn's timeline (T `last`: the latest turn); `--tree`: the tree."""
    import json
    from datetime import UTC, datetime

    from agentq.cli.turn_bars import tree_lines, turn_lines

    if args.tree:
        tree = client.conversation_tree(args.id).model_dump(mode="json")
        lines = [json.dumps(tree, ensure_ascii=False)] if args.json else list(tree_lines(tree))
    else:
        turn = args.turn if args.turn != "last" else client.get_conversation(args.id).turn_id
        if turn is None:
            print(f"agentq inspect: conversation {args.id} has had no turn", file=sys.stderr)
            return 1
        drawn = client.turn_timeline(args.id, turn).model_dump(mode="json")
        lines = ([json.dumps(drawn, ensure_ascii=False)] if args.json
                 else list(turn_lines(drawn, now=datetime.now(UTC))))
    for line in lines:
        print(line)
    return 0


def _cmd_fork(client, args: argparse.Namespace) -> int:
    from agentq.client import Conflict

    try:
        forked = client.fork(args.id, args.at)
    except Conflict as exc:
        print(f"agentq fork: cannot fork {args.id} at seq {args.at}: {exc.message}", file=sys.stderr)
        return 1
    print(forked.id)
    return 0


def _add_api_client(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="the API (default: $AGENTQ_API_URL or http://127.0.0.1:8000)")
    parser.add_argument("--key", help="the API key (default: $AGENTQ_API_KEY; tenant:secret works too)")
    parser.add_argument("--user", help="the user you act for (sent as X-Agentq-User)")


def _redacted(url: str) -> str:
    """A database URL without its password, for printing."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def _add_address(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (0: any free one)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentq", description="Durable LLM-agent conversations.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="bring the database schema to head (Alembic)").set_defaults(
        run=_cmd_migrate
    )
    check = sub.add_parser("check", help="verify the invariants on stored data")
    target = check.add_mutually_exclusive_group(required=True)
    target.add_argument("--all", action="store_true", help="every conversation")
    target.add_argument("id", nargs="?", help="one conversation id")
    check.set_defaults(run=_cmd_check)
    demo = sub.add_parser("demo", help="run a scripted conversation end to end, embedded")
    demo.add_argument("--db", default=None, help="SQLite file to keep (default: a temporary one)")
    demo.set_defaults(run=_cmd_demo)
    dev = sub.add_parser("dev", help="the API, an embedded worker and a sweeper in one process")
    _add_address(dev)
    dev.add_argument("--key", help="the API key to accept (tenant:secret, or a secret of tenant "
                     "dev); default: the one kept beside the dev database")
    dev.add_argument("--reload", action="store_true",
                     help="restart when a tool module, a file it imports from here, or the "
                          "policy file changes")
    dev.add_argument("--reloading", metavar="FILE", help=argparse.SUPPRESS)  # where to say what loaded
    dev.set_defaults(run=_cmd_dev)
    api = sub.add_parser("api", help="serve the HTTP API (use gunicorn in production)")
    _add_address(api)
    api.set_defaults(run=_cmd_api)
    keys = sub.add_parser("keys", help="create, revoke or list API keys")
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="print a new key once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--role", action="append", default=[], dest="roles",
                        help="a role the key carries, for tools' deciders (repeatable)")
    actions.add_parser("revoke", help="revoke a key by id").add_argument("key_id")
    actions.add_parser("list", help="keys without their secrets").add_argument("--tenant")
    keys.set_defaults(run=_cmd_keys)
    tenant_keys = sub.add_parser("tenant-keys", help="tenants' own provider keys, sealed at rest")
    sealing = tenant_keys.add_subparsers(dest="action", required=True)
    sealing.add_parser("new-encryption-key", help="print a new key for AGENTQ_ENCRYPTION_KEYS")
    sealing.add_parser("reseal", help="seal every stored key with the newest encryption key")
    tenant_keys.set_defaults(run=_cmd_tenant_keys)
    sub.add_parser("policy", help="print the profiles and ceilings the processes will use").set_defaults(
        run=_cmd_policy
    )
    chat = sub.add_parser("chat", help="talk to a conversation in the terminal (over the HTTP API)")
    chat.add_argument("id", nargs="?", help="attach to this conversation (default: create one)")
    chat.add_argument("--agent", help="start the new conversation from this agent: NAME (its "
                      "latest version) or NAME@VERSION")
    chat.add_argument("--profile", "--provider", dest="profile",
                      help="model profile of a new conversation (`agentq policy` lists them)")
    chat.add_argument("--model", help="model of a new conversation")
    chat.add_argument("--system", help="system prompt of a new conversation")
    chat.add_argument("--settings", help="more settings of a new conversation: JSON, or @file")
    _add_api_client(chat)
    chat.set_defaults(run=_on_the_api(_cmd_chat))
    inspect = sub.add_parser("inspect", help="print a conversation's log as a timeline")
    inspect.add_argument("id", help="the conversation")
    inspect.add_argument("--json", action="store_true", help="the raw events, one JSON object a line")
    inspect.add_argument("--turn", metavar="TURN_ID",
                         help="the timeline of this turn instead (`last`: the latest turn)")
    inspect.add_argument("--tree", action="store_true",
                         help="the tree of sub-agents under the conversation instead")
    _add_api_client(inspect)
    inspect.set_defaults(run=_on_the_api(_cmd_inspect))
    fork = sub.add_parser("fork", help="copy a conversation's log up to a turn boundary into a new one")
    fork.add_argument("id", help="the conversation to fork")
    fork.add_argument("--at", type=int, required=True, metavar="SEQ", help="the last seq to copy (0: none)")
    _add_api_client(fork)
    fork.set_defaults(run=_on_the_api(_cmd_fork))
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: the process's); its exit status."""
    args = build_parser().parse_args(argv)
    try:
        config = Config.from_env()
    except ValueError as exc:
        print(f"agentq: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log_format, level=logging.INFO if args.verbose else logging.WARNING)
    try:
        return args.run(config, args)
    except PolicyError as exc:
        print(f"agentq: {exc}", file=sys.stderr)
        return 2
