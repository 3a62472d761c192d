"""The cap rule of a tenant's share (inv. 9), written once: how many of the tenant's slots a
claim finds taken. SQLite counts it inside the claim; PostgreSQL runs the same count as the
PL/pgSQL function `agentq_slots_taken`, whose body is compiled from this module
(`plpgsql_body`) and checked equal to what the migrations installed.

A slot is taken by a step of the tenant that runs under a live lease, or waits ahead of
this one (arrived earlier: created_at, then step_key); with kinds, only steps of those
kinds count (a share of one queue's slots). The count stops at the cap.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    and_,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    tuple_,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.expression import FromClause

WAITING = "waiting"  # a step refused a slot by its tenant's cap
# The first key of a tenant's claim lock on PostgreSQL: "agtq".
LOCK_NAMESPACE = int.from_bytes(b"agtq", "big")

KindsFilter = Callable[[ColumnElement[Any]], ColumnElement[bool]]


def arrival(mine: FromClause, *, step_key: Any, now: Any) -> ColumnElement[Any]:
    """When the step arrived: its row's created_at, or `now` for a step not scheduled yet."""
    return func.coalesce(select(mine.c.created_at).where(mine.c.step_key == step_key)
                         .scalar_subquery(), now)


def slots_taken(other: FromClause, *, tenant: Any, step_key: Any, now: Any, cap: Any,
                arrived: Any, kinds: KindsFilter | None = None) -> Select[Any]:
    """The count of the tenant's taken slots, up to `cap`, as seen by the step `step_key`."""
    running = and_(other.c.status == "running", other.c.lease_until >= now)
    ahead = and_(other.c.status == WAITING,
                 tuple_(other.c.created_at, other.c.step_key) < tuple_(arrived, step_key))
    counted = [other.c.tenant == tenant, other.c.step_key != step_key, or_(running, ahead)]
    if kinds is not None:
        counted.append(kinds(other.c.kind))
    taken = select(literal(1).label("one")).select_from(other).where(*counted).limit(cap)
    return select(func.count()).select_from(taken.subquery("taken"))


def _any_of_p_kinds(kind: ColumnElement[Any]) -> ColumnElement[bool]:
    kinds: ColumnElement[Any] = literal_column("p_kinds")
    return or_(kinds.is_(null()), kind == func.any(kinds))


def plpgsql_body(steps: Table) -> str:
    """The body of `agentq_slots_taken`: the tenant's claim lock, then the count.

    A volatile function: each statement in it sees a fresh snapshot, so the count, made
    after the lock is granted, sees every claim that held the lock before this one; counted
    in the claim's own snapshot, two claims at once could both take the last slot. The lock
    lasts until the claim's transaction ends. `p_kinds` NULL: steps of every kind count.
    """
    p: dict[str, ColumnElement[Any]] = {
        name: literal_column(f"p_{name}") for name in ("tenant", "step_key", "now", "cap")}
    arrived = arrival(steps, step_key=p["step_key"], now=p["now"])
    count = slots_taken(steps, tenant=p["tenant"], step_key=p["step_key"], now=p["now"],
                        cap=p["cap"], arrived=literal_column("arrival"), kinds=_any_of_p_kinds)
    return (
        "\nDECLARE\n    arrival timestamptz;\nBEGIN\n"
        f"    PERFORM pg_advisory_xact_lock({LOCK_NAMESPACE}, p_lock_key);\n"
        f"    arrival := {_compiled(arrived)};\n"
        f"    RETURN ({_compiled(count)});\nEND\n"
    )


def _compiled(clause: Any) -> str:
    text = str(clause.compile(dialect=postgresql.dialect(),
                              compile_kwargs={"literal_binds": True}))
    # one clause a line, so the function reads (and diffs) as a query
    lines = " ".join(text.split()).replace(" FROM ", "\n        FROM ").replace(
        " WHERE ", "\n        WHERE ").replace(" AND ", "\n          AND ").replace(
        " OR ", "\n          OR ").replace(" LIMIT ", "\n        LIMIT ")
    return lines


SIGNATURE = ("agentq_slots_taken(\n    p_tenant varchar, p_step_key varchar, p_now timestamptz, "
             "p_cap integer, p_lock_key integer,\n    p_kinds varchar[]\n)")


def plpgsql_function(steps: Table) -> str:
    """The CREATE statement of `agentq_slots_taken`, as a migration runs it."""
    return (f"CREATE OR REPLACE FUNCTION {SIGNATURE}\n"
            f"RETURNS integer LANGUAGE plpgsql VOLATILE AS $${plpgsql_body(steps)}$$")

