"""What the outside can do to a conversation: create it, post a message, resolve a call, end it.

Commands write first and return follow-ups; they never call a model or a tool
(docs/design.md §2). The HTTP API and the CLI are thin shells over these.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, assert_never

from pydantic import ValidationError

from agentq.agents.catalog import Catalog
from agentq.commands.answers import answer_call
from agentq.commands.deciding import DecisionRules
from agentq.commands.guarded import refuse_unknown_code
from agentq.commands.interrupts import CloseRound, close_turn
from agentq.commands.outcomes import abandon, record_ran, run_again
from agentq.commands.refusals import refused
from agentq.commands.resolutions import approve_call, close_call, reject_call
from agentq.core import drafts
from agentq.core.agents import (
    AgentRef,
    AgentVersion,
    NotOverridable,
    parse_agent_ref,
    settings_with_overrides,
)
from agentq.core.decide import ends_a_turn
from agentq.core.deciders import Decider
from agentq.core.events import EventDraft, InboxItem, ToolCallRecord
from agentq.core.fsm import RETRIED
from agentq.core.handoff_targets import code_filter_name
from agentq.core.message_rules import (
    Append,
    LockedConversation,
    MessageRequest,
    Queue,
    Replay,
    classify_message,
    message_request,
)
from agentq.core.outcome_rules import Abandon, RecordRan, RunAgain
from agentq.core.refusal import Refusal
from agentq.core.resolution_rules import (
    AnswerQuestion,
    Approve,
    Close,
    Reject,
    ResolutionVerdict,
    Unchanged,
    classify_resolution,
    resolution_request,
)
from agentq.core.scope import Scope
from agentq.core.settings import FORBIDDEN_SETTING, FUNCTION_PROFILE, Settings, parse_settings
from agentq.core.timefmt import to_utc
from agentq.errors import Conflict, InvalidInput, LogMoved, NotFound
from agentq.followups import Advance, FollowUp, Settled
from agentq.process.clock import utcnow
from agentq.store import ConversationInfo, Store
from agentq.telemetry import tracing
from agentq.tenancy.policy import Policy
from agentq.tools import Registry


@dataclass(frozen=True)
class MessageAnswer:
    """What posting a message returns: `turn_id` is None while the message is queued."""

    message_id: str
    turn_id: str | None
    queued: bool

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "turn_id": self.turn_id, "queued": self.queued}


class Commands:
    """Entry calls, each one transaction on one conversation."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        clock: Callable[[], datetime] = utcnow,
        close_round: CloseRound = lambda round_id: "",
        policy: Policy | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.close_round = close_round
        self.policy = policy or Policy.default()
        # the agents tenants start conversations from (without one: tenants' own agents only)
        self.catalog = catalog or Catalog(store, self.policy.offers_agent)
        self.deciding = DecisionRules(registry, self.policy)  # who may decide, and edits

    def create_conversation(
        self, scope: Scope, settings: dict[str, Any] | Settings, *, agent: str | None = None,
        conversation_id: str | None = None,
    ) -> ConversationInfo:
        """Validate the settings (tools must exist, the operator's policy must allow them)
        and store a new, idle conversation with the settings the policy made of them.

        With `agent` (`name` or `name@version`), the settings are the agent version's, pinned
        now, and `settings` holds only the overrides the agent allows. With a derived
        `conversation_id` (a schedule's run), a second creation under it writes nothing."""
        parsed = settings if isinstance(settings, Settings) else parse_settings(settings)
        if agent is None:
            admitted = self.settings_for(parsed, scope)
            return self._store_new(scope, admitted, None, conversation_id)
        version = self.agent_version(scope, agent)
        try:
            merged = settings_with_overrides(version, parsed.model_dump(mode="json", exclude_unset=True))
        except NotOverridable as exc:
            details = [{"loc": ["settings", name], "msg": "not overridable", "type": "not_overridable"}
                       for name in exc.fields]
            raise InvalidInput(str(exc), code="not_overridable", details=details) from None
        except ValidationError as exc:
            raise InvalidInput(f"the agent's settings with these overrides are not valid: "
                               f"{_first_error(exc)}", code="invalid_overrides") from None
        admitted = self.settings_for(merged, scope, from_code=_models_from_code(version, merged),
                                     code_filters=_handoffs_from_code(version, merged))
        return self._store_new(scope, admitted, version.ref, conversation_id)

    def _store_new(self, scope: Scope, settings: Settings, agent: AgentRef | None,
                   conversation_id: str | None) -> ConversationInfo:
        now = self.clock()
        if conversation_id is None:
            return self.store.conversations.create(tenant=scope.tenant, settings=settings,
                                                   now=now, agent=agent)
        self.store.conversations.create_once(tenant=scope.tenant, settings=settings, now=now,
                                             conversation_id=conversation_id, agent=agent)
        found = self.store.conversations.load(conversation_id, tenant=scope.tenant)
        if found is None:  # the id is another tenant's: it never derives from theirs (inv. 9)
            raise Conflict(f"conversation {conversation_id} exists", code="conversation_exists")
        return found

    def agent_version(self, scope: Scope, agent: str) -> AgentVersion:
        """The version `agent` names, if the tenant may start it; else InvalidInput."""
        try:
            ref = parse_agent_ref(agent)
        except ValueError as exc:
            raise InvalidInput(str(exc), code="invalid_agent") from None
        found = self.catalog.find(scope.tenant, ref.name, version=ref.version)
        if found is None:
            which = ref.name if ref.version is None else f"{ref.name}@{ref.version}"
            raise InvalidInput(f"no agent {which}; GET /v1/agents lists yours",
                               code="unknown_agent")
        return found

    def settings_for(self, settings: Settings, scope: Scope, *, defining: str | None = None,
                     from_code: bool = False, code_filters: bool = False) -> Settings:
        """The settings a conversation of `scope`'s tenant is created with, or InvalidInput:
        the tools exist, the agents it offers as tools, hands over to or guards with are the
        tenant's to use, and the
        operator's policy allows them (an agent's versions too; `defining` names the agent
        whose version these are, which may list itself: a cycle ends at max_agent_depth).
        `from_code`: the profile and model are a code agent's, which may be a function;
        `code_filters`: the handoffs are a code agent's, whose input filters may be functions."""
        try:
            self.registry.require(settings.tools)
        except ValueError as exc:
            raise InvalidInput(str(exc), code="unknown_tool") from None
        refuse_unknown_code(settings, self.registry)
        for field, named in (("agents", settings.agents), ("handoffs", settings.handoffs)):
            self._known_agents(scope, field, [a.name for a in named or ()], defining=defining)
        for field in ("input_guardrails", "output_guardrails"):  # guardrails that are agents
            refs = getattr(settings, field) or ()
            self._known_agents(scope, field, [r.agent for r in refs if r.agent is not None],
                               defining=defining)
        coded = [t.name for t in settings.handoffs or () if code_filter_name(t.input_filter)]
        if coded and not code_filters:
            raise InvalidInput(f"handoffs to {', '.join(coded)} name input filters of the "
                               "operator's code; yours may be all, turn or no_tools",
                               code=FORBIDDEN_SETTING)
        return self.policy.settings_for(settings, scope.tenant, from_code=from_code)

    def _known_agents(self, scope: Scope, field: str, names: list[str], *,
                      defining: str | None) -> None:
        """InvalidInput unless every name is an agent `scope`'s tenant may use (or the one
        being defined)."""
        unknown = [name for name in names
                   if name != defining and self.catalog.find(scope.tenant, name) is None]
        if unknown:
            details = [{"loc": ["settings", field], "msg": f"no agent {name}",
                        "type": "unknown_agent"} for name in unknown]
            raise InvalidInput(f"settings.{field} names no agent of yours: {', '.join(unknown)}; "
                               "GET /v1/agents lists them", code="unknown_agent", details=details)

    def post_message(
        self,
        conversation_id: str,
        content: str | list[Any],
        scope: Scope,
        *,
        on_busy: str = "enqueue",
        idempotency_key: str | None = None,
        created_at: datetime | None = None,
        unattended: dict[str, Any] | None = None,
    ) -> tuple[MessageAnswer, list[FollowUp]]:
        """Append a user_msg at a turn boundary, or queue it (inv. 2); same key, same answer.

        `content` is text or a list of parts (core/parts.py), checked before anything is written.
        `unattended` is a schedule's rule for its run's waiting calls, kept in the user_msg."""
        request = message_request(content, on_busy, idempotency_key=idempotency_key,
                                  created_at=created_at)
        if isinstance(request, Refusal):
            raise refused(request)
        now = self.clock()
        created = now if created_at is None else to_utc(created_at)
        started = self._post_unlocked(conversation_id, request, scope, now=now, created=created,
                                      unattended=unattended)
        if started is not None:
            return started
        with self.store.writes.locked(conversation_id) as tx:
            conv = _own(tx, scope, conversation_id)
            replayed = tx.find_inbox_by_key(idempotency_key) if idempotency_key else None
            waiting = conv.fsm.state == "idle" and tx.inbox_waiting()
            verdict = classify_message(request, _as_read(conv, replayed, waiting))
            written: tuple[MessageAnswer, list[FollowUp]]
            match verdict:
                case Refusal():
                    raise refused(verdict)
                case Replay(answer=first):
                    written = MessageAnswer(**first), []  # inv. 5: nothing appended the second time
                case Queue() | Append():
                    written = self._write_message(tx, _with_unattended(verdict, unattended),
                                                  request, scope, now=now, created=created)
        return written

    def _post_unlocked(
        self, conversation_id: str, request: MessageRequest, scope: Scope, *, now: datetime,
        created: datetime, unattended: dict[str, Any] | None,
    ) -> tuple[MessageAnswer, list[FollowUp]] | None:
        """A post without the conversation's lock: one read of what the message rules need,
        then, for a message that starts a turn and closes none or one that waits, one
        guarded write (agentq.store.posting says why the guard is enough). None: decide
        under the lock (a turn to close, a guard that refused, a conversation not found).

        A refusal or a replay is answered from the read: it writes nothing, and the read is
        one snapshot of committed rows, so its answer is the one the lock would have given
        at that instant, as the lock's is at the instant it is taken."""
        seen = self.store.writes.posting(conversation_id, request.idempotency_key)
        if seen is None or seen.conversation.tenant != scope.tenant:
            return None  # the lock's path says what is not found, as it always has
        conv = seen.conversation
        verdict = classify_message(request, _as_read(
            conv, seen.replayed, conv.fsm.state == "idle" and seen.inbox_waiting))
        match verdict:
            case Refusal():
                raise refused(verdict)
            case Replay(answer=first):
                return MessageAnswer(**first), []  # inv. 5: nothing appended the second time
            case Append(close_turn=True):
                return None  # inv. 2: the turn before is closed under the lock
        item, turn_id = _inbox_item(conv.id, _with_unattended(verdict, unattended), request,
                                    scope, created=created)
        queued = isinstance(verdict, Queue)
        try:
            if queued:
                self.store.writes.queue(item, turn_id=turn_id, read=conv)
            else:
                self.store.writes.start_turn(item, _user_msg(item, turn_id, scope), read=conv,
                                             now=now)
        except LogMoved:
            return None
        return MessageAnswer(item.id, turn_id, queued), [Advance(conv.id)]

    def _write_message(
        self, tx, verdict: Queue | Append, request: MessageRequest, scope: Scope, *,
        now: datetime, created: datetime,
    ) -> tuple[MessageAnswer, list[FollowUp]]:
        """Queue the message, or start its turn with it (closing the turn before, if any)."""
        conversation_id = tx.conversation.id
        item, turn_id = _inbox_item(conversation_id, verdict, request, scope, created=created)
        if isinstance(verdict, Queue):
            tx.add_inbox(item, queued=True, turn_id=turn_id, taken_at=None)
            return MessageAnswer(item.id, turn_id, True), [Advance(conversation_id)]
        settled: list[Settled] = []
        if verdict.close_turn:  # inv. 2: the turn before is closed before this one starts
            settled = close_turn(tx, by=_by(scope), now=now, close_round=self.close_round)
        tx.add_inbox(item, queued=False, turn_id=turn_id, taken_at=now)
        tx.append_and_fold([_user_msg(item, turn_id, scope)], now=now)
        return MessageAnswer(item.id, turn_id, False), [Advance(conversation_id), *settled]

    def resolve(
        self,
        conversation_id: str,
        tool_call_id: str,
        scope: Scope,
        *,
        status: str,
        result: Any,
        reason: str | None = None,
        action: str | None = None,
        content: Any = None,
        args: dict[str, Any] | None = None,
        decider: Decider | None = None,
    ) -> tuple[ToolCallRecord, list[FollowUp]]:
        """Close a pending call; the same answer twice is fine, anything else late is 409.

        A call that needs approval takes `approved` or `rejected` (with an optional
        `reason`) and no result: the person decides on the arguments the model gave. A
        call whose tool server asked a question takes `answered` with MCP's `action`
        and, to accept, the `content` its schema asks for (approve and reject stand for
        accept and decline). The rules are agentq.core.resolution_rules'. An approval of
        an editable tool's call may carry edited `args`; a `decider` the tool's or the
        policy's deciders do not name is Forbidden (agentq.commands.deciding).
        """
        request = resolution_request(conversation_id, tool_call_id, status=status, result=result,
                                     reason=reason, action=action)
        if isinstance(request, Refusal):
            raise refused(request)
        now = self.clock()
        with self.store.writes.locked(conversation_id) as tx:
            conv = _own(tx, scope, conversation_id)
            call = tx.load_call(tool_call_id)
            if call is not None and decider is not None:
                self.deciding.check_decider(call, conv, decider)
            verdict = self.deciding.with_edits(classify_resolution(request, call), status, args)
            written = _write_resolution(tx, verdict, by=_by(scope), now=now, content=content,
                                        decider=decider)
        return written

    def cancel(self, conversation_id: str, scope: Scope) -> list[FollowUp]:
        """Interrupt the running turn: the stream is closed, open calls are cancelled."""
        with self.store.writes.locked(conversation_id) as tx:
            conv = _own(tx, scope, conversation_id)
            if conv.fsm.state not in ("running", "awaiting_input"):
                raise Conflict(f"nothing to cancel: the conversation is {conv.fsm.state}")
            settled = close_turn(tx, by=_by(scope), now=self.clock(), close_round=self.close_round)
        return [Advance(conversation_id), *settled]  # the inbox may hold the next turn

    def retry(self, conversation_id: str, scope: Scope) -> list[FollowUp]:
        """Re-drive a failed conversation: the failure stays in the log, the turn goes on."""
        now = self.clock()
        with self.store.writes.locked(conversation_id) as tx:
            conv = _own(tx, scope, conversation_id)
            if conv.fsm.state != "failed":
                raise Conflict(f"only a failed conversation can be retried; it is {conv.fsm.state}")
            tx.append_and_fold([drafts.error(
                "retried", f"re-driven by {_by(scope)}", status=RETRIED, step_key=None,
                turn_id=conv.fsm.turn_id, round_id=None, created_at=now,
            )], now=now)
        return [Advance(conversation_id)]

    def fork(self, conversation_id: str, scope: Scope, *, at_seq: int) -> ConversationInfo:
        """A new idle conversation with this one's log up to a turn boundary at `at_seq`."""
        source = self.store.conversations.load(conversation_id, tenant=scope.tenant)
        if source is None:
            raise NotFound(f"no conversation {conversation_id}")
        last_seq = source.next_seq - 1
        if at_seq < 0:
            raise InvalidInput("at_seq must not be negative")
        if at_seq > last_seq:  # well-formed, but the log is not that long (yet)
            raise Conflict(f"at_seq {at_seq} is past the end of the log ({last_seq})")
        # the prefix is immutable: checking it outside the copy's transaction is safe;
        # a fork copies the whole prefix anyway, so reading it costs nothing extra
        prefix = self.store.log.list_events(conversation_id, before_seq=at_seq + 2)
        if not ends_a_turn(prefix, at_seq):
            raise Conflict(f"seq {at_seq} is inside a turn; fork at the end of a turn")
        # the policy may have changed since; a model function in stored settings came
        # from the operator's code agent they were created from
        self.settings_for(source.settings, scope,
                          from_code=source.settings.profile == FUNCTION_PROFILE)
        return self.store.log.fork(conversation_id, at_seq=at_seq, now=self.clock())

    def end(self, conversation_id: str, scope: Scope) -> ConversationInfo:
        """End a conversation; its log is kept (inv. 1)."""
        with self.store.writes.locked(conversation_id) as tx:
            _own(tx, scope, conversation_id)
            now = self.clock()
            tx.set_status("ended", now=now)
            tx.cancel_waiting_steps(now=now)  # a step that waits for a slot would hold its place
        info = self.store.conversations.load(conversation_id)
        assert info is not None
        return info


def _models_from_code(version: AgentVersion, settings: Settings) -> bool:
    """Whether `settings` run the model of an agent of the operator's code, as it defines it
    (which may be a model function): a conversation's overrides changed neither."""
    defined = version.definition.settings
    return version.source == "code" and (settings.profile, settings.model) == (
        defined.profile, defined.model)


def _handoffs_from_code(version: AgentVersion, settings: Settings) -> bool:
    """Whether `settings` hand over as an agent of the operator's code defines it (its input
    filters may be its functions): a conversation's overrides did not change them."""
    return version.source == "code" and settings.handoffs == version.definition.settings.handoffs


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def _write_resolution(
    tx, verdict: ResolutionVerdict, *, by: str, now: datetime, content: Any,
    decider: Decider | None,
) -> tuple[ToolCallRecord, list[FollowUp]]:
    """What the verdict on an answer to a call writes, under the lock the command holds;
    each resolution names its `decider` (who, with which key)."""
    match verdict:
        case Refusal():
            raise refused(verdict)
        case Unchanged(call=call):
            return call, []
        case AnswerQuestion(call=call, action=action):
            return answer_call(tx, call, by=by, now=now, content=content, action=action,
                               decider=decider)
        case Approve(call=call, args=args):
            return approve_call(tx, call, by=by, now=now, args=args, decider=decider)
        case Reject(call=call, reason=reason):
            return reject_call(tx, call, by=by, reason=reason, now=now, decider=decider)
        case Close(call=call, status=status, result=result):
            return close_call(tx, call, by=by, status=status, result=result, now=now,
                              decider=decider)
        case RecordRan(call=call, result=result):
            return record_ran(tx, call, by=by, result=result, now=now, decider=decider)
        case RunAgain(call=call):
            return run_again(tx, call, by=by, now=now, decider=decider)
        case Abandon(call=call, reason=reason):
            return abandon(tx, call, by=by, reason=reason, now=now, decider=decider)
    assert_never(verdict)


def _as_read(conv: ConversationInfo, replayed: dict[str, Any] | None,
             inbox_waiting: bool) -> LockedConversation:
    """What the message rules read (the inbox only where it can matter), under the lock or
    in one snapshot without it."""
    return LockedConversation(
        status=conv.status, fsm=conv.fsm, max_image_bytes=conv.settings.limits.max_image_bytes,
        replayed=replayed, inbox_waiting=inbox_waiting,
    )


def _with_unattended(verdict: Queue | Append, unattended: dict[str, Any] | None
                     ) -> Queue | Append:
    """The message with a schedule's rule for its run's waiting calls, if it has one."""
    if not unattended:
        return verdict
    return replace(verdict, message={**verdict.message, "unattended": unattended})


def _inbox_item(conversation_id: str, verdict: Queue | Append, request: MessageRequest,
                scope: Scope, *, created: datetime) -> tuple[InboxItem, str]:
    """The message's inbox row (with the turn's trace, if tracing is on), and the id of the
    turn it starts, named now so a client can follow it while it waits."""
    message = verdict.message
    if (traceparent := tracing().traceparent()) is not None:  # the turn's trace
        message = {**message, "traceparent": traceparent}
    item = InboxItem(
        id=str(uuid.uuid4()), conversation_id=conversation_id,
        content=message, on_busy=request.on_busy, created_at=created,
        idempotency_key=request.idempotency_key, scope=scope.to_json(),
        request_hash=request.request_hash,
    )
    return item, str(uuid.uuid4())


def _user_msg(item: InboxItem, turn_id: str, scope: Scope) -> EventDraft:
    """The user_msg that starts the turn `turn_id` with the message `item`."""
    message = item.content
    return drafts.user_msg(
        message["text"], turn_id=turn_id, message_id=item.id, scope=scope.to_json(),
        created_at=item.created_at, parts=message.get("parts") or (),
        traceparent=message.get("traceparent"), unattended=message.get("unattended"),
    )


def _own(tx, scope: Scope, conversation_id: str) -> ConversationInfo:
    """The locked conversation, if it belongs to the caller's tenant (else 404, not 403)."""
    if tx.conversation.tenant != scope.tenant:
        raise NotFound(f"no conversation {conversation_id}")
    return tx.conversation


def _by(scope: Scope) -> str:
    """Who acted, as the log records it."""
    return scope.user or scope.tenant
