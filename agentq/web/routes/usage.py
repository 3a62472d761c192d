"""/v1/usage: the tokens and model calls a tenant spent, and their cost, per hour or day,
from the rollups.

A tenant reads its own usage with its key. The operator reads every tenant's (or one's,
with `tenant=`) with AGENTQ_OPERATOR_KEY, a key of its own compared in constant time; a
tenant's key never reads another tenant, and `tenant=` from one is refused. Reads sum
hourly rollup rows (agentq.store.usage) over a bounded range, never the events.
/v1/usage/overview is the operator's alone: usage by day, tenant and agent, and the turns
that took longest and cost most (agentq.store.turn_usage).
"""
from __future__ import annotations

import hmac
from decimal import Decimal

from flask import Blueprint, g, request

from agentq.api import usage
from agentq.core.prices import format_money
from agentq.core.scope import Scope
from agentq.core.timefmt import format_ts
from agentq.core.usage import hour_of
from agentq.store.turn_usage import TurnUsage
from agentq.store.usage import UsageRow
from agentq.web import present
from agentq.web.auth import authenticate
from agentq.web.errors import ApiError
from agentq.web.operation import operation
from agentq.web.services import services

bp = Blueprint("usage", __name__, url_prefix="/v1/usage")


def tenant_or_operator() -> None:
    """g.operator is True for the operator's key; otherwise g.scope is the tenant's, or 401."""
    key = services().operator_key
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    secret = secret.strip()
    if key and scheme.lower() == "bearer" and hmac.compare_digest(
            secret.encode("utf-8", "replace"), key.encode("utf-8", "replace")):
        g.operator = True
        g.scope = Scope(tenant="", user=None)  # no tenant's: every read below is the operator's
        return
    g.operator = False
    g.scope = authenticate(services().keys)


@bp.get("")
@operation("Tokens, model calls and their cost, per hour or day, by agent, model, profile or "
           "conversation (the operator's key reads across tenants)",
           query=usage.UsageQuery, answers={200: usage.UsageReport}, errors=(403,),
           auth=tenant_or_operator)
def report(query: usage.UsageQuery):
    by = query.dimensions()
    if g.operator:
        tenant = query.tenant
    else:
        if query.tenant is not None and query.tenant != g.scope.tenant:
            raise ApiError(403, "forbidden", "`tenant` is the operator's: your key reads your "
                                             "own usage only")
        if "tenant" in by:
            raise ApiError(403, "forbidden", "grouping by tenant is the operator's")
        tenant = g.scope.tenant
    rows = services().store.usage.report(tenant=tenant, start=query.start, end=query.end,
                                         group_by=query.group_by, by=by, limit=query.limit + 1)
    return present.dump(usage.UsageReport(
        start=format_ts(hour_of(query.start)), end=format_ts(query.end),
        group_by=query.group_by, by=list(by), tenant=tenant,
        rows=[_row(row) for row in rows[: query.limit]], truncated=len(rows) > query.limit,
    ))


def _row(row: UsageRow) -> usage.UsageRow:
    return usage.UsageRow(start=format_ts(row.start), group=row.keys, **row.tokens.to_json(),
                          cost=Decimal(format_money(row.cost_nanos)))


@bp.get("/overview")
@operation("The operator's overview: tokens and cost per tenant and agent by UTC day, and the "
           "slowest and costliest turns that started in the range (the operator's key only)",
           query=usage.OverviewQuery, answers={200: usage.Overview}, errors=(403,),
           auth=tenant_or_operator)
def overview(query: usage.OverviewQuery):
    if not g.operator:
        raise ApiError(403, "forbidden", "the overview is the operator's: it reads every tenant")
    store = services().store
    rows = store.usage.report(tenant=None, start=query.start, end=query.end, group_by="day",
                              by=("tenant", "agent"), limit=query.limit + 1)
    ranked = {by: store.turns.ranked(start=query.start, end=query.end, by=by, limit=query.turns)
              for by in ("duration", "cost")}
    return present.dump(usage.Overview(
        start=format_ts(hour_of(query.start)), end=format_ts(query.end),
        days=[_row(row) for row in rows[: query.limit]], truncated=len(rows) > query.limit,
        slowest_turns=[_turn(t) for t in ranked["duration"]],
        costliest_turns=[_turn(t) for t in ranked["cost"]],
    ))


def _turn(turn: TurnUsage) -> usage.TurnCost:
    return usage.TurnCost(
        tenant=turn.tenant, agent=turn.agent, conversation_id=turn.conversation_id,
        root_conversation_id=turn.root_conversation_id, turn_id=turn.turn_id,
        started_at=format_ts(turn.started_at), duration_ms=turn.duration_ms, calls=turn.calls,
        input_tokens=turn.input_tokens, output_tokens=turn.output_tokens,
        cost=Decimal(format_money(turn.cost_nanos)))
