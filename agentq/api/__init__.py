"""The HTTP API's contract: every body, query, header set and answer, as pydantic models.

One module per resource, as agentq/web/routes has one blueprint per resource; this package
names them all, for a client: `from agentq.api import Conversation, StreamDelta`. The server
validates requests with these models and answers through them, and /openapi.json is made
from them, so the SDK (agentq.client), which reads the answers with them, cannot drift from
the server. Careful: only pydantic, the standard library and agentq.core may be imported
here, never the server (tests/test_layering.py), so that a client needs nothing else.
"""
from agentq.api.agents import (
    AgentList,
    AgentOut,
    AgentRefOut,
    AgentVersionPage,
    CreateAgent,
    ListAgents,
    ListAgentVersions,
    NewAgentVersion,
)
from agentq.api.common import (
    ErrorAnswer,
    ErrorBody,
    States,
)
from agentq.api.context import (
    Context,
    ContextValidation,
    Eviction,
    SummaryInUse,
)
from agentq.api.conversations import (
    Conversation,
    ConversationItem,
    ConversationPage,
    CreateConversation,
    Fork,
    HandOff,
    ListConversations,
    ParentOut,
    PendingCall,
    SummarySpan,
)
from agentq.api.events import (
    STREAM_DATA,
    BudgetSpent,
    EventOut,
    EventPage,
    ListEvents,
    StreamChildDelta,
    StreamDelta,
    StreamEnd,
    StreamHeaders,
    StreamQuery,
    StreamRetry,
)
from agentq.api.health import (
    Health,
    Readiness,
)
from agentq.api.messages import (
    ImageDataPart,
    ImageURLPart,
    MessageAnswer,
    MessageHeaders,
    PostMessage,
    TextPart,
)
from agentq.api.profiles import (
    ProfileList,
    ProfileOut,
    PutKey,
)
from agentq.api.schedules import (
    ApprovalRule,
    ApprovalsOut,
    CatchUpOut,
    CatchUpRule,
    CreateSchedule,
    ListRuns,
    ListSchedules,
    OneSchedule,
    RunList,
    RunOut,
    ScheduleList,
    ScheduleOut,
)
from agentq.api.tenant_tool_calls import (
    ListTenantToolCalls,
    TenantToolCall,
    TenantToolCallPage,
)
from agentq.api.timeline import (
    ConversationTree,
    TimelineAttempt,
    TimelineCall,
    TimelineMark,
    TimelineModelCall,
    TimelineStep,
    TimelineWait,
    TreeNodeOut,
    TurnTimeline,
)
from agentq.api.tool_calls import (
    Answer,
    CallContext,
    CallResult,
    Decision,
    ListToolCalls,
    OutcomeAnswer,
    Question,
    Resolution,
    ToolCall,
    ToolCallList,
)
from agentq.api.usage import (
    Overview,
    OverviewQuery,
    TurnCost,
    UsageQuery,
    UsageReport,
    UsageRow,
)
from agentq.api.webhooks import (
    Attempt,
    ChangeWebhook,
    CreateWebhook,
    DeliveryList,
    DeliveryOut,
    ListDeliveries,
    RotateSecret,
    WebhookList,
    WebhookOut,
    WebhookWithSecret,
)

__all__ = [
    "AgentList", "AgentOut", "AgentRefOut", "AgentVersionPage", "Answer", "Attempt",
    "BudgetSpent", "CallContext", "CallResult", "ChangeWebhook", "Context", "ContextValidation",
    "Conversation", "ConversationItem", "ConversationPage", "CreateAgent", "CreateConversation",
    "CreateWebhook", "Decision", "DeliveryList", "DeliveryOut", "ErrorAnswer", "ErrorBody",
    "EventOut", "EventPage", "Eviction", "Fork", "HandOff", "Health", "ImageDataPart", "ImageURLPart",
    "ListAgentVersions", "ListAgents", "ListConversations", "ListDeliveries", "ListEvents",
    "ListTenantToolCalls", "ListToolCalls", "MessageAnswer", "MessageHeaders", "NewAgentVersion",
    "ParentOut", "PendingCall", "PostMessage", "ProfileList", "ProfileOut", "PutKey", "Question",
    "Readiness", "Resolution", "RotateSecret", "STREAM_DATA", "States", "StreamChildDelta",
    "StreamDelta", "StreamEnd", "StreamHeaders", "StreamQuery", "StreamRetry", "SummaryInUse",
    "SummarySpan", "TenantToolCall", "TenantToolCallPage", "TextPart", "ToolCall", "ToolCallList",
    "UsageQuery", "UsageReport", "UsageRow", "WebhookList", "WebhookOut", "WebhookWithSecret",
    "OutcomeAnswer",
    "Overview", "OverviewQuery", "TurnCost",
    "ConversationTree", "TimelineAttempt", "TimelineCall", "TimelineMark", "TimelineModelCall",
    "TimelineStep", "TimelineWait", "TreeNodeOut", "TurnTimeline",
    "ApprovalRule", "ApprovalsOut", "CatchUpOut", "CatchUpRule", "CreateSchedule", "ListRuns",
    "ListSchedules", "OneSchedule", "RunList", "RunOut", "ScheduleList", "ScheduleOut",
]
