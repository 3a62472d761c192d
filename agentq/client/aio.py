"""`AsyncClient` and `AsyncTurn`: `Client` and `Turn` for asyncio, method for method.

Kept in step with agentq/client/sync.py: the same methods, each the same request from
agentq/client/calls.py; only the sending awaits.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

import httpx2
from pydantic import BaseModel

import agentq.api as api
from agentq.client import calls
from agentq.client.config import Endpoint, endpoint
from agentq.client.errors import ApiError, StreamBroken, Unreachable, error_for
from agentq.client.pages import AsyncPage
from agentq.client.retries import DEFAULT_RETRIES, Retries
from agentq.client.streams import MAX_EVENT_BYTES, StreamItem, TurnCursor, TurnResult, Waits

OnBusy = Literal["enqueue", "interrupt", "reject"]
# The API sends a keep-alive every 15 s by default: a stream silent for longer is dead.
STREAM_READ_S = 60.0


class AsyncClient:
    """A tenant's view of one agentq API; `user` is the acting user sent with every call.

    `url` and `key` default to AGENTQ_API_URL and AGENTQ_API_KEY (the key may be in the
    server's bootstrap form `tenant:secret`). `http`, if given, is used as it is (its
    base URL, headers and transport are yours to set).
    """

    def __init__(self, url: str | None = None, key: str | None = None, *, user: str | None = None,
                 timeout_s: float = 30.0, retries: Retries = DEFAULT_RETRIES,
                 env: Mapping[str, str] | None = None, http: httpx2.AsyncClient | None = None) -> None:
        self.endpoint: Endpoint = endpoint(url, key, env)
        self.user, self.retries = user, retries
        self.http = http or httpx2.AsyncClient(base_url=self.endpoint.url, headers=self.endpoint.headers(),
                                          timeout=timeout_s, trust_env=False)

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- conversations ---------------------------------------------------------------------

    async def create_conversation(self, settings: BaseModel | Mapping[str, Any] | None = None, *,
                            agent: str | None = None, user: str | None = None) -> api.Conversation:
        """A new conversation from raw settings, or from an agent (`"support"`, `"support@3"`)."""
        return await self._run(calls.create_conversation(settings, agent, self._who(user)))

    async def list_conversations(
        self, *, status: str | None = None, cursor: str | None = None, limit: int = 50,
        user: str | None = None,
    ) -> AsyncPage[api.ConversationItem]:
        """Conversations, oldest first, `limit` a page; iterating the page goes on to the next."""
        return await self._list(calls.list_conversations(status, cursor, limit, self._who(user)))

    async def iter_conversations(self, *, status: str | None = None,
                                 user: str | None = None) -> AsyncIterator[api.ConversationItem]:
        """Every conversation, page after page."""
        async for item in await self.list_conversations(status=status, limit=200, user=user):
            yield item

    async def get_conversation(self, conversation_id: str, *, user: str | None = None) -> api.Conversation:
        return await self._run(calls.get_conversation(conversation_id, self._who(user)))

    async def end_conversation(self, conversation_id: str, *, user: str | None = None) -> api.Conversation:
        """End it: no new message is taken; its log is kept."""
        return await self._run(calls.end_conversation(conversation_id, self._who(user)))

    async def cancel(self, conversation_id: str, *, user: str | None = None) -> api.Conversation:
        """Interrupt the running turn; Conflict if none runs."""
        return await self._run(calls.cancel(conversation_id, self._who(user)))

    async def hand_off(self, conversation_id: str, to: str, *, why: str = "",
                       input_filter: str = "all", user: str | None = None) -> api.Conversation:
        """Hand the conversation to the agent `to` (a name, or `name@version`: a version of its
        own agent moves it there) between turns; Conflict while a turn runs."""
        return await self._run(calls.hand_off(conversation_id, to, why, input_filter, self._who(user)))

    async def retry(self, conversation_id: str, *, user: str | None = None) -> api.Conversation:
        """Re-drive a failed turn; Conflict if the conversation has not failed."""
        return await self._run(calls.retry(conversation_id, self._who(user)))

    async def fork(self, conversation_id: str, at_seq: int, *,
                   user: str | None = None) -> api.Conversation:
        """A new conversation with a copy of the log through `at_seq` (the end of a turn)."""
        return await self._run(calls.fork(conversation_id, at_seq, self._who(user)))

    async def context(self, conversation_id: str, *, user: str | None = None) -> api.Context:
        """The next model request, as it would be sent, and its validation."""
        return await self._run(calls.context(conversation_id, self._who(user)))

    # -- messages, turns and the log -------------------------------------------------------

    async def send(self, conversation_id: str, content: str | list[Any], *,
             idempotency_key: str | None = None, on_busy: OnBusy = "enqueue",
             user: str | None = None) -> AsyncTurn:
        """Post a user message; the answer's turn, to `stream()` or `wait()` for.

        The same `idempotency_key` again gets the same turn, and posts nothing twice.
        """
        answer = await self._run(calls.send(conversation_id, content, on_busy, idempotency_key,
                                      self._who(user)))
        return AsyncTurn(self, conversation_id, answer, self._who(user))

    def turn(self, conversation_id: str, turn_id: str, *, user: str | None = None) -> AsyncTurn:
        """A turn by its id (from a message's answer, or a conversation's `turn_id`)."""
        answer = api.MessageAnswer(message_id="", turn_id=turn_id, queued=False)
        return AsyncTurn(self, conversation_id, answer, self._who(user))

    async def events(self, conversation_id: str, *, after_seq: int = 0, limit: int = 100,
                     user: str | None = None) -> AsyncPage[api.EventOut]:
        """The log after `after_seq`, `limit` events a page; iterating the page goes on to the next."""
        return await self._list(calls.events(conversation_id, after_seq, limit, self._who(user)))

    async def iter_events(self, conversation_id: str, *, after_seq: int = 0,
                          user: str | None = None) -> AsyncIterator[api.EventOut]:
        """The whole log after `after_seq`, page after page."""
        async for event in await self.events(conversation_id, after_seq=after_seq, limit=1000,
                                             user=user):
            yield event

    # -- tool calls ------------------------------------------------------------------------

    async def tool_calls(self, conversation_id: str, *, status: str | None = None,
                         user: str | None = None) -> AsyncPage[api.ToolCall]:
        """The conversation's calls (`status="pending"`: with its sub-agents' that wait for a
        person), all in one page."""
        return await self._list(calls.tool_calls(conversation_id, status, self._who(user)))

    async def pending_calls(self, *, executor: str | None = None, cursor: str | None = None,
                            limit: int = 50, user: str | None = None) -> AsyncPage[api.TenantToolCall]:
        """Calls waiting for a person or a client, across the tenant's conversations, oldest
        first, `limit` a page; iterating the page goes on to the next."""
        return await self._list(calls.pending_calls(executor, "pending", cursor, limit,
                                                    self._who(user)))

    async def approve(self, conversation_id: str, call_id: str, *,
                      args: Mapping[str, Any] | None = None,
                      user: str | None = None) -> api.ToolCall:
        """Say yes to a call waiting for a person: a gated call runs as shown, or with the
        edited `args` when its tool is editable; a human call's result is {"approved": true}.
        A key the call's deciders do not name raises Forbidden."""
        return await self._run(calls.decide(conversation_id, call_id, "approved", None,
                                            self._who(user), args))

    async def reject(self, conversation_id: str, call_id: str, reason: str | None = None, *,
               user: str | None = None) -> api.ToolCall:
        """Say no: a gated call never runs and the model reads why; a human call's result is
        {"approved": false, "reason": …}."""
        return await self._run(calls.decide(conversation_id, call_id, "rejected", reason, self._who(user)))

    async def reply(self, conversation_id: str, call_id: str, content: Mapping[str, Any] | None = None,
              *, action: str = "accept", user: str | None = None) -> api.ToolCall:
        """Answer the question a call's tool server asked (`call.elicitation`): `content`
        fits its `requested_schema`; `action` "decline" or "cancel" says no, with none."""
        return await self._run(calls.reply(conversation_id, call_id, action, content, self._who(user)))

    async def answer(self, conversation_id: str, call_id: str, result: Any, *, error: bool = False,
                     user: str | None = None) -> api.ToolCall:
        """Resolve a pending call with `result` (or as failed, with `error=True`)."""
        status = "errored" if error else "resolved"
        return await self._run(calls.resolve(conversation_id, call_id, status, result, self._who(user)))

    async def settle(self, conversation_id: str, call_id: str, outcome: str, result: Any = None,
                     *, reason: str | None = None, user: str | None = None) -> api.ToolCall:
        """Say what became of a call whose outcome is unknown (`call.outcome_unknown`: a
        `once` tool's run found started and unfinished): `outcome` "ran" with the `result`
        the model reads, "did_not_run" (it runs now, once), or "abandoned" (the model reads
        that its outcome is unknown, and `reason`)."""
        return await self._run(calls.settle(conversation_id, call_id, outcome, result, reason,
                                            self._who(user)))

    async def call_context(self, conversation_id: str, call_id: str, *,
                     user: str | None = None) -> api.CallContext:
        """What a person decides a pending call on: the turn's message, the model's text, the
        tool's description and the turn's earlier calls."""
        return await self._run(calls.call_context(conversation_id, call_id, self._who(user)))

    # -- webhooks ----------------------------------------------------------------------------

    async def create_webhook(self, url: str, event_types: Sequence[str]) -> api.WebhookWithSecret:
        """Register an endpoint for these event types; its signing secret is in this answer only."""
        return await self._run(calls.create_webhook(url, event_types))

    async def list_webhooks(self) -> AsyncPage[api.WebhookOut]:
        """Your webhook endpoints, all in one page."""
        return await self._list(calls.list_webhooks())

    async def get_webhook(self, webhook_id: str) -> api.WebhookOut:
        """One endpoint: its URL, event types, whether it is enabled and why not."""
        return await self._run(calls.get_webhook(webhook_id))

    async def update_webhook(self, webhook_id: str, *, url: str | None = None,
                       event_types: Sequence[str] | None = None,
                       enabled: bool | None = None) -> api.WebhookOut:
        """Change an endpoint's URL or event types, or disable / enable it."""
        return await self._run(calls.update_webhook(webhook_id, url, event_types, enabled))

    async def rotate_webhook_secret(self, webhook_id: str, *,
                              grace_s: float = 86_400.0) -> api.WebhookWithSecret:
        """A new signing secret (in this answer only); the old one signs too for `grace_s`."""
        return await self._run(calls.rotate_webhook_secret(webhook_id, grace_s))

    async def delete_webhook(self, webhook_id: str) -> None:
        """Remove an endpoint and its deliveries."""
        await self._run(calls.delete_webhook(webhook_id))

    async def webhook_deliveries(self, webhook_id: str, *,
                                 limit: int = 50) -> AsyncPage[api.DeliveryOut]:
        """The endpoint's latest `limit` deliveries, newest first, with each attempt's status code."""
        return await self._list(calls.webhook_deliveries(webhook_id, limit))

    # -- schedules ---------------------------------------------------------------------------

    async def create_schedule(self, name: str, message: str | Sequence[Mapping[str, Any]], *,
                        cron: str | None = None, timezone: str = "UTC",
                        every_s: float | None = None, agent: str | None = None,
                        conversation_id: str | None = None,
                        catch_up: Mapping[str, Any] | None = None,
                        approvals: Mapping[str, Any] | None = None,
                        paused: bool = False) -> api.ScheduleOut:
        """A schedule: `cron` in `timezone` or `every_s`; each slot starts a conversation from `agent`
        with `message`, or posts it into `conversation_id`."""
        return await self._run(calls.create_schedule(
            name, message, cron=cron, timezone=timezone, every_s=every_s, agent=agent,
            conversation_id=conversation_id, catch_up=catch_up, approvals=approvals,
            paused=paused))

    async def list_schedules(self, *, upcoming: int = 3) -> AsyncPage[api.ScheduleOut]:
        """Your schedules, each with its next `upcoming` slots, all in one page."""
        return await self._list(calls.list_schedules(upcoming))

    async def get_schedule(self, schedule_id: str, *, upcoming: int = 10) -> api.ScheduleOut:
        """One schedule, with its next `upcoming` slots."""
        return await self._run(calls.get_schedule(schedule_id, upcoming))

    async def pause_schedule(self, schedule_id: str) -> api.ScheduleOut:
        """Pause a schedule: no slot fires until it is resumed."""
        return await self._run(calls.pause_schedule(schedule_id))

    async def resume_schedule(self, schedule_id: str) -> api.ScheduleOut:
        """Resume a schedule from its next slot after now."""
        return await self._run(calls.resume_schedule(schedule_id))

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule and the record of its runs; their conversations stay."""
        await self._run(calls.delete_schedule(schedule_id))

    async def schedule_runs(self, schedule_id: str, *, limit: int = 50) -> AsyncPage[api.RunOut]:
        """The runs the schedule fired, the latest slot first, each with its conversation."""
        return await self._list(calls.schedule_runs(schedule_id, limit))

    # -- agents ----------------------------------------------------------------------------

    async def create_agent(self, name: str, settings: BaseModel | Mapping[str, Any] | None = None, *,
                           description: str = "", overridable: Sequence[str] = (),
                           user: str | None = None) -> api.AgentOut:
        """A new agent of the tenant, at version 1; Conflict if the name is taken."""
        return await self._run(calls.create_agent(name, settings, description, overridable,
                                                   self._who(user)))

    async def publish_agent_version(self, name: str, settings: BaseModel | Mapping[str, Any] | None = None,
                                    *, description: str = "", overridable: Sequence[str] = (),
                                    user: str | None = None) -> api.AgentOut:
        """The agent's next version: a whole definition; earlier versions stay as they were."""
        return await self._run(calls.publish_agent_version(name, settings, description, overridable,
                                                            self._who(user)))

    async def list_agents(self, *, cursor: str | None = None, limit: int = 100,
                          user: str | None = None) -> AsyncPage[api.AgentOut]:
        """The agents the tenant may use (its own and the operator's), latest version each,
        by name, `limit` a page; iterating the page goes on to the next."""
        return await self._list(calls.list_agents(cursor, limit, self._who(user)))

    async def list_agent_versions(self, name: str, *, cursor: int | None = None, limit: int = 100,
                                  user: str | None = None) -> AsyncPage[api.AgentOut]:
        """An agent's versions, oldest first, `limit` a page; iterating the page goes on to the next."""
        return await self._list(calls.list_agent_versions(name, cursor, limit, self._who(user)))

    async def get_agent(self, name: str, version: int | None = None, *,
                        user: str | None = None) -> api.AgentOut:
        """An agent's latest version, or the one numbered `version`."""
        return await self._run(calls.get_agent(name, version, self._who(user)))

    async def usage(self, start: calls.Instant, end: calls.Instant, *,
                    group_by: Literal["day", "hour"] = "day", by: Sequence[str] = (),
                    tenant: str | None = None, limit: int = 1000) -> api.UsageReport:
        """Tokens and model calls spent in [start, end), per UTC `group_by` ("day" or "hour")
        and per `by` (agent, model, profile, conversation; tenant for the operator). Your
        own usage; with the operator's key, every tenant's, or `tenant`'s. `start` and `end`
        are timezone-aware datetimes, dates (UTC days) or ISO 8601 strings."""
        return await self._run(calls.usage(start, end, group_by, by, tenant, limit))

    async def overview(self, start: calls.Instant, end: calls.Instant, *, turns: int = 10,
                       limit: int = 1000) -> api.Overview:
        """The operator's overview of [start, end) (the operator's key only): tokens and cost
        per UTC day, tenant and agent, and the `turns` slowest and costliest turns that
        started in it, each with its conversation and turn id."""
        return await self._run(calls.overview(start, end, turns, limit))

    async def turn_timeline(self, conversation_id: str, turn_id: str, *,
                      user: str | None = None) -> api.TurnTimeline:
        """A turn's timeline: each step with its attempts and waits, its calls (a sub-agent's
        with its child conversation), its model calls with their tokens."""
        return await self._run(calls.turn_timeline(conversation_id, turn_id, self._who(user)))

    async def conversation_tree(self, conversation_id: str, *,
                          user: str | None = None) -> api.ConversationTree:
        """The conversation and its children and grandchildren: state, agent, tokens."""
        return await self._run(calls.conversation_tree(conversation_id, self._who(user)))

    async def profiles(self) -> AsyncPage[api.ProfileOut]:
        """The model profiles you may use, all in one page."""
        return await self._list(calls.profiles())

    async def set_provider_key(self, profile: str, api_key: str) -> None:
        """Your own key for a profile that takes one: stored sealed, never shown again."""
        await self._run(calls.set_provider_key(profile, api_key))

    async def delete_provider_key(self, profile: str) -> None:
        """Forget your own key for a profile; NotFound if none is set."""
        await self._run(calls.delete_provider_key(profile))

    # -- sending ---------------------------------------------------------------------------

    def _who(self, user: str | None) -> str | None:
        return self.user if user is None else user

    async def _list(self, call: calls.Call[Any]) -> AsyncPage[Any]:
        """A listing's answer as an AsyncPage, which fetches the pages after it when asked."""
        assert call.listing is not None
        return AsyncPage(await self._run(call), call.listing,
                         lambda cursor: self._list(call.after(cursor)))

    async def _run(self, call: calls.Call[Any]) -> Any:
        tried = 0
        while True:
            tried += 1
            try:
                response = await self.http.request(call.method, call.path, params=call.params or None,
                                             json=call.json, headers=call.headers)
                return call.read(response.status_code, _json(response), response.headers)
            except (ApiError, httpx2.TransportError) as exc:
                wait = self.retries.wait_s(tried, exc, idempotent=call.idempotent)
                if wait is None:
                    if isinstance(exc, httpx2.TransportError):
                        raise Unreachable(_unreachable(self.endpoint.url, exc)) from exc
                    raise self.endpoint.explained(exc) from None
                await asyncio.sleep(wait)


class AsyncTurn:
    """One message's turn: `stream()` its events and text from the first delta, or `wait()`."""

    def __init__(self, client: AsyncClient, conversation_id: str, answer: api.MessageAnswer,
                 user: str | None) -> None:
        self.client, self.conversation_id, self.answer, self.user = client, conversation_id, answer, user

    def __repr__(self) -> str:
        return f"AsyncTurn({self.conversation_id!r}, turn_id={self.turn_id!r}, queued={self.queued})"

    @property
    def turn_id(self) -> str:
        return self.answer.turn_id or ""

    @property
    def message_id(self) -> str:
        return self.answer.message_id

    @property
    def queued(self) -> bool:
        """The message waits in the inbox behind a running turn."""
        return self.answer.queued

    async def stream(self, *, include_children: bool = False) -> AsyncGenerator[StreamItem, None]:
        """The turn from its start to its end (the last item is its StreamEnd).

        A dropped connection is resumed with Last-Event-ID: nothing is lost, nothing repeated.
        With `include_children`, the text of the sub-agents it starts comes too, as
        StreamChildDelta items naming the child conversation (live only: pieces sent while
        a connection was down are not sent again; the child's log has its answer).
        """
        cursor = TurnCursor(self.turn_id)
        failures = 0
        while cursor.end is None:
            call = calls.stream(self.conversation_id, self.turn_id, cursor.last_seq, self.user,
                                include_children)
            try:
                async with aclosing(self._connection(call, cursor)) as connection:
                    async for item in connection:
                        failures = 0
                        yield item
            except (ApiError, httpx2.TransportError) as exc:
                failures += 1
                wait = self.client.retries.wait_s(failures, exc, idempotent=True)
                if wait is None:
                    if isinstance(exc, ApiError):
                        raise
                    raise StreamBroken(_unreachable(self.client.endpoint.url, exc)) from exc
                await asyncio.sleep(wait)

    async def _connection(self, call: calls.Call[None],
                          cursor: TurnCursor) -> AsyncGenerator[StreamItem, None]:
        timeout = httpx2.Timeout(self.client.http.timeout.connect, read=STREAM_READ_S)
        async with self.client.http.sse(call.path, params=call.params, headers=call.headers,
                                  timeout=timeout, max_event_size=MAX_EVENT_BYTES) as source:
            response = source.response
            if response.status_code >= 400:
                await response.aread()
                raise error_for(response.status_code, _json(response),
                                calls.retry_after(response.headers), response.reason_phrase)
            cursor.connected()
            async for sse in source:
                item = cursor.accept(sse.event, sse.data)
                if item is not None:
                    yield item
        if cursor.end is None:
            raise httpx2.RemoteProtocolError("the stream closed before the turn ended")

    async def wait(self, *, stop_for_input: bool = False) -> TurnResult:
        """Follow the turn to its end; with `stop_for_input`, also return once it waits for
        a person or the client (`pending` lists the calls)."""
        waits = Waits(self.turn_id)
        async with aclosing(self.stream()) as items:  # returning early closes the connection now
            async for item in items:
                if isinstance(item, api.StreamEnd):
                    return waits.result(item.state)
                if waits.saw(item) and stop_for_input:
                    conversation = await self.client.get_conversation(self.conversation_id,
                                                                      user=self.user)
                    if waits.waiting(conversation):
                        return waits.result(conversation.state, conversation.pending)
        raise StreamBroken("the stream ended without its end")  # stream() only returns after it


def _json(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _unreachable(url: str, exc: Exception) -> str:
    reason = str(exc) or type(exc).__name__
    return (f"cannot reach the agentq API at {url} ({reason}); is `agentq dev` or `agentq api` "
            "running there? (url= or AGENTQ_API_URL)")
