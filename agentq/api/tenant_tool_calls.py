"""The shapes of /v1/tool-calls: every call of a tenant's conversations, page by page."""
from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from agentq.api.common import AnswerModel, RequestModel
from agentq.api.tool_calls import ToolCall
from agentq.core.events import CallStatus, Executor

_ID = r"[A-Za-z0-9_.:\-]{1,255}"
# `<conversation_id>/<tool_call_id>` of the last call of the previous page ('/' is in no id).
CallCursor = Annotated[str, StringConstraints(pattern=f"^{_ID}/{_ID}$")]


class ListTenantToolCalls(RequestModel):
    status: CallStatus | None = Field(None, description="only calls with this status")
    executor: Executor | None = Field(None, description="only calls run by this executor")
    cursor: CallCursor | None = Field(None, description="`next_cursor` of the previous page")
    limit: int = Field(50, ge=1, le=200)


class TenantToolCall(ToolCall):
    conversation_id: str


class TenantToolCallPage(AnswerModel):
    tool_calls: list[TenantToolCall]
    next_cursor: str | None
