"""Approving a call with edited arguments: when a person may, and what the model reads.

A tool that allows it (`@agentq.tool(needs_approval=True, editable=True)`) lets a person
change the arguments before approving; the tool runs with theirs. Without the flag an
approval carries no arguments, as before. The log keeps both: the model's in its
`tool_call`, the person's in the `resolution` that approved them (`args`), and the model
reads a note beside the tool's result saying that a person changed them (`edit_note`).
Whether the edited arguments fit the tool's schema is the command's check, with the tool.
"""
from __future__ import annotations

import json
from typing import Any

from agentq.core.refusal import Refusal
from agentq.core.resolution_rules import Approve, ResolutionVerdict, Unchanged, late

NOT_EDITABLE = "not_editable"
EDITS_NEED_APPROVAL = "edits_need_approval"


def with_edits(verdict: ResolutionVerdict, status: str, args: dict[str, Any] | None, *,
               editable: bool) -> ResolutionVerdict:
    """The verdict on an approval once its edited `args` (None: the model's) are weighed."""
    if args is None:
        return _as_given(verdict)
    if status != "approved":
        return Refusal.invalid("edited arguments go with an approval (status approved)",
                               code=EDITS_NEED_APPROVAL)
    if isinstance(verdict, Refusal):
        return verdict
    if not isinstance(verdict, Approve | Unchanged) or not verdict.call.needs_approval:
        return Refusal.invalid("edited arguments go with an approval of a call that needs "
                               "approval", code=EDITS_NEED_APPROVAL)
    call = verdict.call
    if not editable:
        return Refusal.invalid(f"tool {call.name} takes no edited arguments: approve or reject "
                               "the arguments the model gave", code=NOT_EDITABLE)
    if isinstance(verdict, Unchanged):  # inv. 5: the same edited approval twice is one
        return verdict if args == call.args else late(
            f"tool call {call.id} is already approved with other arguments", call)
    return Approve(call) if args == call.args else Approve(call, args=args)


def _as_given(verdict: ResolutionVerdict) -> ResolutionVerdict:
    """An approval as the model gave it is not the approval of edited arguments made before."""
    if isinstance(verdict, Unchanged) and verdict.call.model_args is not None and (
            verdict.call.status in ("scheduled", "done")):
        return late(f"tool call {verdict.call.id} is already approved with edited arguments",
                    verdict.call)
    return verdict


def edit_note(args: dict[str, Any]) -> str:
    """What the model reads before a result whose call a person approved with other arguments."""
    return ("[a person changed the arguments before approving; the tool ran with "
            f"{json.dumps(args, sort_keys=True)}]")
