"""Each SDK method as a request to build and an answer to read, shared by both clients.

`Client` and `AsyncClient` differ only in how they send: what a method sends, which
model reads its answer and whether it may be sent again are declared once here.
The models are the API's own (agentq.api), so the SDK cannot drift from the
server or its OpenAPI document.
"""
from __future__ import annotations

import dataclasses
import email.utils
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

import agentq.api as api
from agentq.client.errors import ApiError, error_for

T = TypeVar("T")
USER_HEADER = "X-Agentq-User"


@dataclass(frozen=True)
class Listing:
    """Where a listing's answer holds its items and the cursor of the next page (None: the
    whole list comes in one answer), and the query parameter that takes that cursor."""

    items: str
    cursor: str | None = None
    param: str = "cursor"


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer: `answer` validates the JSON (None: no body).

    `idempotent`: sending it twice does what sending it once does, so a lost answer may be
    retried; a request that is not is retried only when the server surely did nothing.
    `listing`: the answer is a list, which the clients hand out as a page.
    """

    method: str
    path: str
    answer: type[T] | None
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = False
    listing: Listing | None = None

    def after(self, cursor: Any) -> Call[T]:
        """The same listing's next page: the one after `cursor`."""
        assert self.listing is not None
        return dataclasses.replace(self, params={**self.params, self.listing.param: cursor})

    def read(self, status: int, body: Any, headers: Mapping[str, str]) -> T:
        """The answer as its model, or the ApiError it stands for."""
        if status >= 400:
            raise error_for(status, body, retry_after(headers))
        if self.answer is None:
            return None  # type: ignore[return-value]
        return self.answer.model_validate(body)  # type: ignore[attr-defined]


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date)."""
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if not raw:
        return None
    if raw.strip().isdigit():
        return float(raw.strip())
    try:
        when = email.utils.parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _user(user: str | None) -> dict[str, str]:
    return {} if user is None else {USER_HEADER: user}


def _drop_none(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _settings(settings: BaseModel | Mapping[str, Any] | None) -> dict[str, Any]:
    if settings is None:
        return {}
    if isinstance(settings, BaseModel):
        return settings.model_dump(mode="json", exclude_unset=True)
    return dict(settings)


# -- conversations ------------------------------------------------------------------------


def create_conversation(settings: BaseModel | Mapping[str, Any] | None, agent: str | None,
                        user: str | None) -> Call[api.Conversation]:
    body: dict[str, Any] = {}
    if agent is not None:
        body["agent"] = agent
    if settings is not None or agent is None:
        body["settings"] = _settings(settings)
    return Call("POST", "/v1/conversations", api.Conversation, json=body, headers=_user(user))


def list_conversations(status: str | None, cursor: str | None, limit: int,
                       user: str | None) -> Call[api.ConversationPage]:
    return Call("GET", "/v1/conversations", api.ConversationPage,
                params=_drop_none(status=status, cursor=cursor, limit=limit), headers=_user(user),
                idempotent=True, listing=Listing("conversations", "next_cursor"))


def get_conversation(cid: str, user: str | None) -> Call[api.Conversation]:
    return Call("GET", f"/v1/conversations/{cid}", api.Conversation, headers=_user(user),
                idempotent=True)


def end_conversation(cid: str, user: str | None) -> Call[api.Conversation]:
    return Call("DELETE", f"/v1/conversations/{cid}", api.Conversation, headers=_user(user),
                idempotent=True)


def hand_off(cid: str, to: str, why: str, input_filter: str, user: str | None
             ) -> Call[api.Conversation]:
    return Call("POST", f"/v1/conversations/{cid}/handoff", api.Conversation,
                json={"to": to, "why": why, "input_filter": input_filter}, headers=_user(user))


def cancel(cid: str, user: str | None) -> Call[api.Conversation]:
    return Call("POST", f"/v1/conversations/{cid}/cancel", api.Conversation, headers=_user(user))


def retry(cid: str, user: str | None) -> Call[api.Conversation]:
    return Call("POST", f"/v1/conversations/{cid}/retry", api.Conversation, headers=_user(user))


def fork(cid: str, at_seq: int, user: str | None) -> Call[api.Conversation]:
    return Call("POST", f"/v1/conversations/{cid}/fork", api.Conversation,
                json={"at_seq": at_seq}, headers=_user(user))


def context(cid: str, user: str | None) -> Call[api.Context]:
    return Call("GET", f"/v1/conversations/{cid}/context", api.Context, headers=_user(user),
                idempotent=True)


# -- messages and the log -----------------------------------------------------------------


def send(cid: str, content: str | list[Any], on_busy: str, idempotency_key: str | None,
         user: str | None) -> Call[api.MessageAnswer]:
    """Always with an Idempotency-Key (a fresh one if none is given): a retry after a lost
    answer replays the first answer instead of posting the message twice."""
    key = idempotency_key or f"sdk-{uuid.uuid4()}"
    return Call("POST", f"/v1/conversations/{cid}/messages", api.MessageAnswer,
                json={"content": content, "on_busy": on_busy},
                headers={"Idempotency-Key": key, **_user(user)}, idempotent=True)


def events(cid: str, after_seq: int, limit: int, user: str | None) -> Call[api.EventPage]:
    return Call("GET", f"/v1/conversations/{cid}/events", api.EventPage,
                params={"after_seq": after_seq, "limit": limit}, headers=_user(user),
                idempotent=True, listing=Listing("events", "next_after_seq", "after_seq"))


def stream(cid: str, turn_id: str, last_seq: int | None, user: str | None,
           include_children: bool = False) -> Call[None]:
    """The turn's stream; `last_seq` (the last event received) resumes it."""
    headers = {"Accept": "text/event-stream", **_user(user)}
    if last_seq is not None:
        headers["Last-Event-ID"] = str(last_seq)
    params = {"turn_id": turn_id, **({"include_children": "1"} if include_children else {})}
    return Call("GET", f"/v1/conversations/{cid}/stream", None, params=params,
                headers=headers, idempotent=True)


# -- tool calls ---------------------------------------------------------------------------


def tool_calls(cid: str, status: str | None, user: str | None) -> Call[api.ToolCallList]:
    return Call("GET", f"/v1/conversations/{cid}/tool-calls", api.ToolCallList,
                params=_drop_none(status=status), headers=_user(user), idempotent=True,
                listing=Listing("tool_calls"))


def pending_calls(executor: str | None, status: str | None, cursor: str | None, limit: int,
                  user: str | None) -> Call[api.TenantToolCallPage]:
    return Call("GET", "/v1/tool-calls", api.TenantToolCallPage,
                params=_drop_none(status=status, executor=executor, cursor=cursor, limit=limit),
                headers=_user(user), idempotent=True, listing=Listing("tool_calls", "next_cursor"))


def resolve(cid: str, call_id: str, status: str, result: Any,
            user: str | None) -> Call[api.ToolCall]:
    """The same answer twice is 200 both times: safe to send again."""
    return Call("POST", f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                api.ToolCall, json={"status": status, "result": result},
                headers=_user(user), idempotent=True)


def decide(cid: str, call_id: str, status: str, reason: str | None,
           user: str | None, args: Mapping[str, Any] | None = None) -> Call[api.ToolCall]:
    """A person's yes or no: a gated call runs as shown (or with the edited `args`, when its
    tool is editable) or never; a human call's result becomes {"approved": …, "reason": …}.
    The same decision twice is 200 both times; a key the call's deciders do not name, 403."""
    body: dict[str, Any] = {"status": status, **({} if reason is None else {"reason": reason})}
    if args is not None:
        body["args"] = dict(args)
    return Call("POST", f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                api.ToolCall, json=body, headers=_user(user), idempotent=True)


def reply(cid: str, call_id: str, action: str, content: Mapping[str, Any] | None,
          user: str | None) -> Call[api.ToolCall]:
    """A person's answer to a tool server's question (the call's `elicitation`); the same
    answer twice is 200 both times."""
    body: dict[str, Any] = {"status": "answered", "action": action}
    if content is not None:
        body["content"] = dict(content)
    return Call("POST", f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                api.ToolCall, json=body, headers=_user(user), idempotent=True)


def settle(cid: str, call_id: str, outcome: str, result: Any, reason: str | None,
           user: str | None) -> Call[api.ToolCall]:
    """What became of a call whose outcome is unknown (`call.outcome_unknown`): "ran" with
    its result, "did_not_run" or "abandoned". The same answer twice is 200 both times."""
    body: dict[str, Any] = {"status": outcome}
    if result is not None:
        body["result"] = result
    if reason is not None:
        body["reason"] = reason
    return Call("POST", f"/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                api.ToolCall, json=body, headers=_user(user), idempotent=True)


# -- agents -------------------------------------------------------------------------------


def _definition(settings: BaseModel | Mapping[str, Any] | None, description: str,
                overridable: Sequence[str]) -> dict[str, Any]:
    return {"settings": _settings(settings), "description": description,
            "overridable": list(overridable)}


def create_agent(name: str, settings: BaseModel | Mapping[str, Any] | None, description: str,
                 overridable: Sequence[str], user: str | None) -> Call[api.AgentOut]:
    return Call("POST", "/v1/agents", api.AgentOut,
                json={"name": name, **_definition(settings, description, overridable)},
                headers=_user(user))


def publish_agent_version(name: str, settings: BaseModel | Mapping[str, Any] | None,
                          description: str, overridable: Sequence[str],
                          user: str | None) -> Call[api.AgentOut]:
    return Call("POST", f"/v1/agents/{name}/versions", api.AgentOut,
                json=_definition(settings, description, overridable), headers=_user(user))


def list_agents(cursor: str | None, limit: int, user: str | None) -> Call[api.AgentList]:
    return Call("GET", "/v1/agents", api.AgentList,
                params=_drop_none(cursor=cursor, limit=limit), headers=_user(user),
                idempotent=True, listing=Listing("agents", "next_cursor"))


def list_agent_versions(name: str, cursor: int | None, limit: int,
                        user: str | None) -> Call[api.AgentVersionPage]:
    return Call("GET", f"/v1/agents/{name}/versions", api.AgentVersionPage,
                params=_drop_none(cursor=cursor, limit=limit), headers=_user(user),
                idempotent=True, listing=Listing("versions", "next_cursor"))


def get_agent(name: str, version: int | None, user: str | None) -> Call[api.AgentOut]:
    path = f"/v1/agents/{name}" if version is None else f"/v1/agents/{name}/versions/{version}"
    return Call("GET", path, api.AgentOut, headers=_user(user), idempotent=True)


# -- profiles -----------------------------------------------------------------------------


def profiles() -> Call[api.ProfileList]:
    return Call("GET", "/v1/profiles", api.ProfileList, idempotent=True,
                listing=Listing("profiles"))


def set_provider_key(profile: str, api_key: str) -> Call[None]:
    return Call("PUT", f"/v1/profiles/{profile}/key", None, json={"api_key": api_key},
                idempotent=True)


def delete_provider_key(profile: str) -> Call[None]:
    return Call("DELETE", f"/v1/profiles/{profile}/key", None, idempotent=True)


def call_context(cid: str, call_id: str, user: str | None) -> Call[api.CallContext]:
    return Call("GET", f"/v1/conversations/{cid}/tool-calls/{call_id}/context",
                api.CallContext, headers=_user(user), idempotent=True)


def create_webhook(url: str, event_types: Sequence[str]) -> Call[api.WebhookWithSecret]:
    """Not sent twice: a lost answer would leave an endpoint whose secret nobody saw."""
    return Call("POST", "/v1/webhooks", api.WebhookWithSecret,
                json={"url": url, "event_types": list(event_types)})


def list_webhooks() -> Call[api.WebhookList]:
    return Call("GET", "/v1/webhooks", api.WebhookList, idempotent=True,
                listing=Listing("webhooks"))


def get_webhook(webhook_id: str) -> Call[api.WebhookOut]:
    return Call("GET", f"/v1/webhooks/{webhook_id}", api.WebhookOut, idempotent=True)


def update_webhook(webhook_id: str, url: str | None, event_types: Sequence[str] | None,
                   enabled: bool | None) -> Call[api.WebhookOut]:
    body = _drop_none(url=url, enabled=enabled,
                      event_types=None if event_types is None else list(event_types))
    return Call("PATCH", f"/v1/webhooks/{webhook_id}", api.WebhookOut, json=body,
                idempotent=True)


def rotate_webhook_secret(webhook_id: str, grace_s: float) -> Call[api.WebhookWithSecret]:
    """Not sent twice: a second rotation would retire the secret the first one showed."""
    return Call("POST", f"/v1/webhooks/{webhook_id}/rotate", api.WebhookWithSecret,
                json={"grace_s": grace_s})


def delete_webhook(webhook_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/webhooks/{webhook_id}", None, idempotent=True)


def webhook_deliveries(webhook_id: str, limit: int) -> Call[api.DeliveryList]:
    return Call("GET", f"/v1/webhooks/{webhook_id}/deliveries", api.DeliveryList,
                params={"limit": limit}, idempotent=True, listing=Listing("deliveries"))


# -- schedules ----------------------------------------------------------------------------


def create_schedule(name: str, message: str | Sequence[Mapping[str, Any]], *, cron: str | None,
                    timezone: str, every_s: float | None, agent: str | None,
                    conversation_id: str | None, catch_up: Mapping[str, Any] | None,
                    approvals: Mapping[str, Any] | None, paused: bool) -> Call[api.ScheduleOut]:
    """Not sent twice: a lost answer would leave a second schedule firing beside the first."""
    body = _drop_none(name=name, cron=cron, every_s=every_s, agent=agent,
                      conversation_id=conversation_id,
                      catch_up=None if catch_up is None else dict(catch_up),
                      approvals=None if approvals is None else dict(approvals))
    content = message if isinstance(message, str) else [dict(part) for part in message]
    return Call("POST", "/v1/schedules", api.ScheduleOut,
                json={**body, "message": content, "timezone": timezone, "paused": paused})


def list_schedules(upcoming: int) -> Call[api.ScheduleList]:
    return Call("GET", "/v1/schedules", api.ScheduleList, params={"upcoming": upcoming},
                idempotent=True, listing=Listing("schedules"))


def get_schedule(schedule_id: str, upcoming: int) -> Call[api.ScheduleOut]:
    return Call("GET", f"/v1/schedules/{schedule_id}", api.ScheduleOut,
                params={"upcoming": upcoming}, idempotent=True)


def pause_schedule(schedule_id: str) -> Call[api.ScheduleOut]:
    return Call("POST", f"/v1/schedules/{schedule_id}/pause", api.ScheduleOut, idempotent=True)


def resume_schedule(schedule_id: str) -> Call[api.ScheduleOut]:
    return Call("POST", f"/v1/schedules/{schedule_id}/resume", api.ScheduleOut, idempotent=True)


def delete_schedule(schedule_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/schedules/{schedule_id}", None, idempotent=True)


def schedule_runs(schedule_id: str, limit: int) -> Call[api.RunList]:
    return Call("GET", f"/v1/schedules/{schedule_id}/runs", api.RunList,
                params={"limit": limit}, idempotent=True, listing=Listing("runs"))


# -- usage --------------------------------------------------------------------------------


Instant = datetime | date | str


def _rfc3339(when: Instant) -> str:
    """`when` as the API reads it, in UTC: a date is its UTC day's first instant, a string
    an ISO 8601 date or datetime. A time without its timezone is refused, not guessed."""
    if isinstance(when, str):
        when = _from_iso(when)
    if not isinstance(when, datetime):
        when = datetime(when.year, when.month, when.day, tzinfo=UTC)
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"usage() needs a timezone with a time ({when.isoformat()}): "
                         "a timezone-aware datetime, a date (a UTC day) or an ISO 8601 string "
                         "such as 2026-11-28 or 2026-11-28T09:00:00Z")
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _from_iso(text: str) -> date | datetime:
    """An ISO 8601 date (`2026-11-28`) or datetime (`2026-11-28T09:00:00Z`)."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"usage() takes ISO 8601 dates or datetimes, not {text!r}") from None


def usage(start: Instant, end: Instant, group_by: str, by: Sequence[str],
          tenant: str | None, limit: int) -> Call[api.UsageReport]:
    params = _drop_none(**{"from": _rfc3339(start), "to": _rfc3339(end)}, group_by=group_by,
                        by=",".join(by), tenant=tenant, limit=limit)
    return Call("GET", "/v1/usage", api.UsageReport, params=params, idempotent=True)


def overview(start: Instant, end: Instant, turns: int, limit: int) -> Call[api.Overview]:
    params = {"from": _rfc3339(start), "to": _rfc3339(end), "turns": turns, "limit": limit}
    return Call("GET", "/v1/usage/overview", api.Overview, params=params, idempotent=True)


def turn_timeline(cid: str, turn_id: str, user: str | None) -> Call[api.TurnTimeline]:
    return Call("GET", f"/v1/conversations/{cid}/turns/{turn_id}/timeline", api.TurnTimeline,
                headers=_user(user), idempotent=True)


def conversation_tree(cid: str, user: str | None) -> Call[api.ConversationTree]:
    return Call("GET", f"/v1/conversations/{cid}/tree", api.ConversationTree,
                headers=_user(user), idempotent=True)


__all__ = ["ApiError", "Call", "Instant", "Listing", "retry_after"]
