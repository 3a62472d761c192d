"""Every operation /openapi.json declares has its SDK method, on both clients: a new
endpoint without one fails here, so the SDK and the API cannot drift apart."""
from __future__ import annotations

import inspect

from agentq.client import AsyncClient, Client
from tests.support.api import Api

NOT_FOR_PROGRAMS = {("get", "/healthz"), ("get", "/readyz"), ("get", "/openapi.json"),
                    ("get", "/metrics")}
METHOD_OF = {
    ("post", "/v1/conversations"): "create_conversation",
    ("get", "/v1/conversations"): "list_conversations",
    ("get", "/v1/conversations/{conversation_id}"): "get_conversation",
    ("delete", "/v1/conversations/{conversation_id}"): "end_conversation",
    ("post", "/v1/conversations/{conversation_id}/messages"): "send",
    ("get", "/v1/conversations/{conversation_id}/events"): "events",
    ("get", "/v1/conversations/{conversation_id}/stream"): "turn",
    ("get", "/v1/conversations/{conversation_id}/tool-calls"): "tool_calls",
    ("post", "/v1/conversations/{conversation_id}/tool-calls/{call_id}/resolution"): "answer",
    ("get", "/v1/conversations/{conversation_id}/context"): "context",
    ("post", "/v1/conversations/{conversation_id}/cancel"): "cancel",
    ("post", "/v1/conversations/{conversation_id}/retry"): "retry",
    ("post", "/v1/conversations/{conversation_id}/fork"): "fork",
    ("get", "/v1/tool-calls"): "pending_calls",
    ("get", "/v1/profiles"): "profiles",
    ("put", "/v1/profiles/{profile}/key"): "set_provider_key",
    ("delete", "/v1/profiles/{profile}/key"): "delete_provider_key",
    ("post", "/v1/agents"): "create_agent",
    ("get", "/v1/agents"): "list_agents",
    ("get", "/v1/agents/{name}"): "get_agent",
    ("post", "/v1/agents/{name}/versions"): "publish_agent_version",
    ("get", "/v1/agents/{name}/versions"): "list_agent_versions",
    ("get", "/v1/agents/{name}/versions/{version}"): "get_agent",
    ("get", "/v1/conversations/{conversation_id}/tool-calls/{call_id}/context"): "call_context",
    ("post", "/v1/webhooks"): "create_webhook",
    ("get", "/v1/webhooks"): "list_webhooks",
    ("get", "/v1/webhooks/{webhook_id}"): "get_webhook",
    ("patch", "/v1/webhooks/{webhook_id}"): "update_webhook",
    ("post", "/v1/webhooks/{webhook_id}/rotate"): "rotate_webhook_secret",
    ("delete", "/v1/webhooks/{webhook_id}"): "delete_webhook",
    ("get", "/v1/webhooks/{webhook_id}/deliveries"): "webhook_deliveries",
    ("get", "/v1/usage"): "usage",
    ("post", "/v1/conversations/{conversation_id}/handoff"): "hand_off",
    ("get", "/v1/usage/overview"): "overview",
    ("get", "/v1/conversations/{conversation_id}/turns/{turn_id}/timeline"): "turn_timeline",
    ("get", "/v1/conversations/{conversation_id}/tree"): "conversation_tree",
    ("post", "/v1/schedules"): "create_schedule",
    ("get", "/v1/schedules"): "list_schedules",
    ("get", "/v1/schedules/{schedule_id}"): "get_schedule",
    ("post", "/v1/schedules/{schedule_id}/pause"): "pause_schedule",
    ("post", "/v1/schedules/{schedule_id}/resume"): "resume_schedule",
    ("delete", "/v1/schedules/{schedule_id}"): "delete_schedule",
    ("get", "/v1/schedules/{schedule_id}/runs"): "schedule_runs",
}


def test_every_operation_of_the_openapi_document_has_a_method_on_both_clients(sqlite_store):
    spec = Api(sqlite_store).client.get("/openapi.json").json
    declared = {(method, path) for path, ops in spec["paths"].items() for method in ops}
    missing = sorted(declared - NOT_FOR_PROGRAMS - set(METHOD_OF))
    assert not missing, f"operations without an SDK method: {missing}"
    for operation in declared - NOT_FOR_PROGRAMS:
        name = METHOD_OF[operation]
        assert callable(getattr(Client, name)), name
        assert getattr(AsyncClient, name).__doc__ == getattr(Client, name).__doc__, name
        if name != "turn":  # a turn handle is made, not fetched
            assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name
