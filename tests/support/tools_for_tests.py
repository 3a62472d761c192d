"""Tools the runtime tests register: they count their calls, fail, or wait for a person."""
from __future__ import annotations

import threading

import agentq

CALLS: dict[str, int] = {}
_LOCK = threading.Lock()


def _count(name: str) -> None:
    with _LOCK:
        CALLS[name] = CALLS.get(name, 0) + 1


@agentq.tool
def lookup(key: str) -> str:
    """Look a key up; counts its calls."""
    _count(f"lookup:{key}")
    return f"value of {key}"


@agentq.tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("the tool exploded")


@agentq.tool(executor="human", expires_in=60)
def approve(amount: float) -> None:
    """Ask a person to approve an amount."""


@agentq.tool
def slow_lookup(key: str, seconds: float, ctx: agentq.ToolContext) -> str:
    """Write one line per run to $AGENTQ_TEST_TOOL_LOG, then take its time (crash tests)."""
    import os
    import time

    with open(os.environ["AGENTQ_TEST_TOOL_LOG"], "a") as log:
        log.write(f"{ctx.tool_call_id}\n")
    time.sleep(seconds)
    return f"value of {key}"


@agentq.tool(executor="human", expires_in=3)
def quick_approve(amount: float) -> None:
    """Ask a person, who has three seconds to answer."""


@agentq.tool
def big_result(size: int) -> str:
    """A result of `size` characters (eviction tests)."""
    return "x" * size


@agentq.tool(queue="agentq.tests.own")
def own_queue_lookup(key: str) -> str:
    """Look a key up on the workers of a queue of its own (queue routing tests)."""
    return f"own value of {key}"


@agentq.tool(executor="human", expires_in=8)
def approve_soon(amount: float) -> None:
    """Ask a person, who has eight seconds to answer (takeover tests)."""


@agentq.tool
async def async_lookup(key: str) -> str:
    """Look a key up the asyncio way: a sleep, then a hop through asyncio.to_thread."""
    import asyncio

    await asyncio.sleep(0.05)
    found = await asyncio.to_thread(str.upper, key)
    return f"async value of {found}"


def _over_100(args: dict, scope: agentq.Scope) -> bool:
    return args["amount"] > 100


@agentq.tool(needs_approval=_over_100, expires_in=60)
def issue_refund(order: str, amount: float, ctx: agentq.ToolContext) -> str:
    """Refund an order; a person approves refunds above 100. Counts its runs, and writes
    one line per run to $AGENTQ_TEST_TOOL_LOG when set (worker tests)."""
    import json
    import os

    _count(f"issue_refund:{ctx.tool_call_id}")
    if os.environ.get("AGENTQ_TEST_TOOL_LOG"):
        with open(os.environ["AGENTQ_TEST_TOOL_LOG"], "a") as log:
            log.write(json.dumps({"call": ctx.tool_call_id, "order": order, "amount": amount}) + "\n")
    return f"refunded {amount:.2f} on order {order}"


@agentq.tool(needs_approval=True, expires_in=3)
def quick_refund(order: str, amount: float) -> str:
    """A refund a person has three seconds to approve (expiry tests)."""
    _count(f"quick_refund:{order}")
    return f"refunded {amount:.2f} on order {order}"


@agentq.tool
def segfault() -> str:
    """Crash the worker process that runs it, as a broken C extension would (poison tests)."""
    import ctypes

    return ctypes.string_at(0).decode()  # reads address 0: SIGSEGV


def _paid(order: str) -> str | None:
    """The call id of the payment of `order` in $AGENTQ_TEST_EFFECTS, if one was made."""
    import json
    import os

    path = os.environ.get("AGENTQ_TEST_EFFECTS")
    if not path or not os.path.exists(path):
        return None
    with open(path) as effects:
        for line in effects:
            row = json.loads(line)
            if row["order"] == order:
                return row["call"]
    return None


def _pay(order: str, amount: float, seconds: float, ctx: agentq.ToolContext) -> str:
    """The payment's side effect first, at its start: a row in $AGENTQ_TEST_EFFECTS (worker
    tests) and a count; then it takes `seconds`."""
    import json
    import os
    import time

    _count(f"pay:{ctx.tool_call_id}")
    if os.environ.get("AGENTQ_TEST_EFFECTS"):
        with open(os.environ["AGENTQ_TEST_EFFECTS"], "a") as effects:
            effects.write(json.dumps({"call": ctx.tool_call_id, "order": order,
                                      "amount": amount}) + "\n")
    time.sleep(seconds)
    return f"paid {amount:.2f} for order {order}"


@agentq.tool(effect="once")
def pay(order: str, amount: float, seconds: float, ctx: agentq.ToolContext) -> str:
    """Pay for an order, a provider that ignores idempotency keys: must not run twice."""
    return _pay(order, amount, seconds, ctx)


def _look_up_payment(args: dict, ctx: agentq.ToolContext) -> object:
    """Ask the payments (the effects file): was this order paid? An order named
    `unknown-*` cannot be told; `broken-*` makes the reconcile raise."""
    if args["order"].startswith("unknown-"):
        return agentq.CannotTell("the provider's search is down")
    if args["order"].startswith("broken-"):
        raise RuntimeError("the provider answered 500")
    paid = _paid(args["order"])
    if paid is not None:
        return agentq.Ran(f"paid {args['amount']:.2f} for order {args['order']} (found)")
    return agentq.DidNotRun()


@agentq.tool(effect="once", reconcile=_look_up_payment)
def pay_reconciled(order: str, amount: float, seconds: float, ctx: agentq.ToolContext) -> str:
    """Pay for an order; a takeover asks the payments whether it went through."""
    return _pay(order, amount, seconds, ctx)


@agentq.tool(effect="once", needs_approval=True, expires_in=60)
def pay_gated(order: str, amount: float, seconds: float, ctx: agentq.ToolContext) -> str:
    """Pay for an order once a person approves: must not run twice."""
    return _pay(order, amount, seconds, ctx)
EDITED_RUNS: dict[str, dict] = {}  # the arguments each call of `editable_refund` ran with


@agentq.tool(needs_approval=True, editable=True, expires_in=60)
def editable_refund(order: str, amount: float, ctx: agentq.ToolContext) -> str:
    """A refund a person approves, and may correct before approving (edits tests)."""
    _count(f"editable_refund:{ctx.tool_call_id}")
    EDITED_RUNS[ctx.tool_call_id] = {"order": order, "amount": amount}
    return f"refunded {amount:.2f} on order {order}"


@agentq.tool(needs_approval=True, expires_in=60,
             deciders=agentq.Deciders(roles=("finance",), not_self=True))
def finance_refund(order: str, amount: float, ctx: agentq.ToolContext) -> str:
    """A refund only a key with the role finance approves, never the user who asked (deciders tests)."""
    _count(f"finance_refund:{ctx.tool_call_id}")
    return f"refunded {amount:.2f} on order {order}"
