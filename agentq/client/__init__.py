"""agentq's public Python SDK: `Client` (blocking) and `AsyncClient`, with the same methods.

    from agentq.client import Client

    with Client("http://127.0.0.1:8000", key) as client:
        conversation = client.create_conversation(agent="support")
        turn = client.send(conversation.id, "Where is my order 42?")
        for item in turn.stream():
            if isinstance(item, StreamDelta):
                print(item.text, end="", flush=True)

Answers are the API's own pydantic models (the ones its OpenAPI document is made from),
and a listing's answer is a `Page` of them that iterates every item, page after page;
errors are `ApiError` subclasses carrying the API's `code`. This package imports neither
Flask, Celery nor SQLAlchemy: a program that only talks to agentq needs none of them.
"""
from agentq.api import (
    Context,
    Conversation,
    ConversationItem,
    ConversationPage,
    EventOut,
    EventPage,
    MessageAnswer,
    PendingCall,
    ProfileOut,
    StreamChildDelta,
    StreamDelta,
    StreamEnd,
    StreamRetry,
    TenantToolCall,
    TenantToolCallPage,
    ToolCall,
)
from agentq.client.aio import AsyncClient, AsyncTurn
from agentq.client.errors import (
    ApiError,
    ClientError,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    RateLimited,
    ServerError,
    StreamBroken,
    Unauthorized,
    Unavailable,
    Unreachable,
)
from agentq.client.pages import AsyncPage, Page
from agentq.client.retries import NO_RETRIES, Retries
from agentq.client.streams import StreamItem, TurnResult
from agentq.client.sync import Client, Turn

__all__ = [
    "ApiError", "AsyncClient", "AsyncPage", "AsyncTurn", "Client", "ClientError", "Conflict",
    "Context", "Conversation", "ConversationItem", "ConversationPage", "EventOut", "EventPage",
    "Forbidden", "InvalidRequest", "MessageAnswer", "NO_RETRIES", "NotFound", "Page",
    "PendingCall", "ProfileOut", "RateLimited", "Retries", "ServerError", "StreamBroken",
    "StreamChildDelta", "StreamDelta",
    "StreamEnd", "StreamItem", "StreamRetry", "TenantToolCall", "TenantToolCallPage", "ToolCall",
    "Turn", "TurnResult", "Unauthorized", "Unavailable", "Unreachable",
]
