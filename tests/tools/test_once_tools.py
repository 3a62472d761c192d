"""`@tool(effect=...)` and a `once` tool's reconcile as the registry runs it: values checked
at definition, any reconcile's answer, or failure, turned into one of three."""
from __future__ import annotations

import pytest

import agentq
from agentq.core.scope import Scope
from agentq.tools import Registry, ToolContext

CTX = ToolContext("call-1", "conv-1", Scope(tenant="t1", user="u1"))


def pay(order: str) -> str:
    """Pay for an order."""
    return f"paid {order}"


def test_a_tool_is_idempotent_unless_it_says_once():
    assert agentq.tool(pay).effect == "idempotent"
    assert agentq.tool(effect="once")(pay).effect == "once"


@pytest.mark.parametrize("options", [
    {"effect": "twice"}, {"effect": "ONCE"}, {"effect": None},
    {"effect": "once", "executor": "human"},
    {"reconcile": lambda args, ctx: agentq.DidNotRun()},  # reconcile without once
    {"effect": "once", "reconcile": "not a function"},
])
def test_a_bad_effect_or_reconcile_fails_at_definition(options):
    with pytest.raises(ValueError):
        agentq.tool(**options)(pay)


def registry_with(reconcile) -> Registry:
    return Registry([agentq.tool(effect="once", reconcile=reconcile)(pay)])


async def found_async(args: dict, ctx: ToolContext):
    return agentq.Ran({"order": args["order"], "by": ctx.tool_call_id})


def raising(args: dict, ctx: ToolContext):
    raise RuntimeError("the provider answered 500")


@pytest.mark.parametrize(("reconcile", "expected"), [
    (lambda args, ctx: agentq.DidNotRun(), agentq.DidNotRun()),
    (lambda args, ctx: agentq.CannotTell("search down"), agentq.CannotTell("search down")),
    (found_async, agentq.Ran({"order": "A-17", "by": "call-1"})),
    (raising, agentq.CannotTell("reconcile raised RuntimeError: the provider answered 500")),
    (lambda args, ctx: True,
     agentq.CannotTell("reconcile returned bool, not Ran, DidNotRun or CannotTell")),
])
def test_the_registry_turns_what_a_reconcile_does_into_one_of_three_answers(reconcile, expected):
    answer = registry_with(reconcile).reconcile("pay", {"order": "A-17"}, CTX, timeout_s=5)
    assert answer == expected


def test_a_once_tool_without_a_reconcile_cannot_tell():
    registry = Registry([agentq.tool(effect="once")(pay)])
    assert registry.reconcile("pay", {"order": "A-17"}, CTX, timeout_s=5) == agentq.CannotTell()
