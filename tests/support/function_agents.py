"""Agents whose model is a function of the request, as an application defines them for its
tests: a refunder that reacts to what its gated refund returned, and one that delegates."""
from __future__ import annotations

import agentq
from tests.support.tools_for_tests import explode, issue_refund

# Every request the functions were asked, in order (tests clear it).
ASKED: list[agentq.ModelRequest] = []


def refunds(request: agentq.ModelRequest):
    """Refund 1299 on order A-17, then say how it went: approved, refused, failed."""
    ASKED.append(request)
    if "explode" in request.text and not request.results:
        return {"tool_calls": [{"name": "explode"}]}
    if not request.results:
        return {"text": "I will refund order A-17.", "chunks": 3,
                "tool_calls": [{"name": "issue_refund", "args": {"order": "A-17", "amount": 1299.0}}]}
    (result,) = request.results
    return {"ok": f"Done: {result.text}", "rejected": f"No refund: {result.text}"}.get(
        result.status, f"{result.name} went wrong ({result.status}): {result.text}")


def delegates(request: agentq.ModelRequest):
    """Ask the refunder, then repeat its answer."""
    ASKED.append(request)
    if not request.results:
        return {"tool_calls": [{"name": "refunder", "args": {"input": request.text}}]}
    return f"The refunder says: {request.results[0].text}"


refunder = agentq.agent("refunder", description="Refunds orders.", model=refunds,
                        tools=[issue_refund, explode], overridable=["model", "system"])
lead = agentq.agent("lead", model=agentq.FunctionModel(delegates, name="lead_model"),
                    agents=[refunder])
