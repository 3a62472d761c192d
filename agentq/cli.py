"""The `agentq` command: migrate, demo, dev, api, keys, check."""
from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import Sequence

from agentq.config import Config


def _cmd_migrate(config: Config, args: argparse.Namespace) -> int:
    from agentq.store import Store

    store = Store.open(config.database_url)
    store.migrate()
    store.dispose()
    print(f"schema is at head on {_redacted(config.database_url)}")
    return 0


def _cmd_check(config: Config, args: argparse.Namespace) -> int:
    from agentq.check import check_all, check_conversation
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
    from agentq.demo import run_demo

    return run_demo(config, db_path=args.db)


def _cmd_dev(config: Config, args: argparse.Namespace) -> int:
    from agentq.embedded import Embedded
    from agentq.store.api_keys import new_secret
    from web.app import create_app
    from web.serve import serve_in_thread
    from web.services import embedded_services

    embedded = Embedded(config)
    api_key = config.api_key or f"dev:{new_secret()}"
    app = create_app(services=embedded_services(embedded, api_key))
    server = serve_in_thread(app, host=args.host, port=args.port)
    print(f"agentq dev: API on http://{args.host}:{server.server_port}, worker and sweeper on "
          f"{_redacted(config.database_url)}; Ctrl-C stops")
    if not config.api_key:
        print(f"  API key of tenant dev: {api_key.split(':', 1)[1]}", flush=True)

    def wait_forever(_: Embedded) -> int:
        embedded.stopping.wait()
        return 0

    try:
        return embedded.run(wait_forever)
    finally:
        server.shutdown()


def _cmd_api(config: Config, args: argparse.Namespace) -> int:
    from web.app import create_app
    from web.serve import serve
    from web.services import build_services

    return serve(create_app(services=build_services(config)), host=args.host, port=args.port)


def _cmd_keys(config: Config, args: argparse.Namespace) -> int:
    from agentq.runtime import utcnow
    from agentq.store import Store

    store = Store.open(config.database_url)
    try:
        if args.action == "create":
            key_id, secret = store.create_api_key(args.tenant, utcnow())
            print(f"key {key_id} of tenant {args.tenant} (shown once, keep it):\n{secret}")
            return 0
        if args.action == "revoke":
            revoked = store.revoke_api_key(args.key_id, utcnow())
            print(f"revoked {args.key_id}" if revoked else f"no unrevoked key {args.key_id}")
            return 0 if revoked else 1
        for key in store.list_api_keys(tenant=args.tenant):
            print(f"{key.id}  {key.tenant}  created {key.created_at:%Y-%m-%d %H:%M}"
                  + ("  revoked" if key.revoked_at else ""))
        return 0
    finally:
        store.dispose()


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
    dev.set_defaults(run=_cmd_dev)
    api = sub.add_parser("api", help="serve the HTTP API (use gunicorn in production)")
    _add_address(api)
    api.set_defaults(run=_cmd_api)
    keys = sub.add_parser("keys", help="create, revoke or list API keys")
    actions = keys.add_subparsers(dest="action", required=True)
    actions.add_parser("create", help="print a new key once").add_argument("--tenant", required=True)
    actions.add_parser("revoke", help="revoke a key by id").add_argument("key_id")
    actions.add_parser("list", help="keys without their secrets").add_argument("--tenant")
    keys.set_defaults(run=_cmd_keys)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = Config.from_env()
    except ValueError as exc:
        print(f"agentq: {exc}", file=sys.stderr)
        return 2
    return args.run(config, args)


if __name__ == "__main__":
    sys.exit(main())
