"""The `agentq` command: migrate, demo, dev, check."""
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

    embedded = Embedded(config)
    print(f"agentq dev: worker and sweeper on {_redacted(config.database_url)}; Ctrl-C stops")

    def wait_forever(_: Embedded) -> int:
        embedded.stopping.wait()
        return 0

    return embedded.run(wait_forever)


def _redacted(url: str) -> str:
    """A database URL without its password, for printing."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


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
    sub.add_parser("dev", help="embedded worker and sweeper in one process").set_defaults(
        run=_cmd_dev
    )
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
