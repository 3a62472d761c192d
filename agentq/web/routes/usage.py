"""/v1/usage: the tokens and model calls a tenant spent, and their cost, per hour or day,
from the rollups.

A tenant reads its own usage with its key. The operator reads every tenant's (or one's,
with `tenant=`) with AGENTQ_OPERATOR_KEY, a key of its own compared in constant time; a
tenant's key never reads another tenant, and `tenant=` from one is refused. Reads sum
hourly rollup rows (agentq.store.usage) over a bounded range, never the events.
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
from agentq.store.usage import UsageRow
from agentq.web import present
from agentq.web.auth import authenticate
from agentq.web.errors import ApiError
from agentq.web.operation import operation
from agentq.web.services import services

bp = Blueprint("usage", __name__, url_prefix="/v1/usage")


def _tenant_or_operator() -> None:
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
           auth=_tenant_or_operator)
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
