"""`agentq chat`: a person talks to a conversation in the terminal, through the SDK only.

One turn: post the line and follow that turn's stream (agentq.client), print deltas as
they come and the tool calls compactly, ask the person when a call waits for them (a
human or client call, one that needs approval, a tool server's question), and stop when
the turn is over. Ctrl-C during a turn cancels it on the server.
"""
from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TextIO, TypeVar

from agentq.cli.timeline import call_text, summarize
from agentq.client import (
    Client,
    ClientError,
    Conflict,
    EventOut,
    Forbidden,
    InvalidRequest,
    NotFound,
    PendingCall,
    StreamDelta,
    StreamEnd,
    StreamRetry,
    Turn,
)
from agentq.client.streams import for_someone, waiting_after

try:  # line editing and history where the platform has it
    readline: ModuleType | None = importlib.import_module("readline")
except ImportError:  # pragma: no cover - Windows
    readline = None

T = TypeVar("T")
PROMPT = "you> "
AGENT = "agent> "
APPROVE = {"a", "approve", "y", "yes"}
REJECT = {"r", "reject", "n", "no"}
DECLINE = {"d", "decline"}
CANCEL = {"c", "cancel"}
EDIT = {"e", "edit"}
QUIT = {"/quit", "/exit"}


class Leave(Exception):
    """The person closed the input (Ctrl-D) while a call waited for them."""


def answer_for(text: str) -> tuple[str, Any] | None:
    """The resolution a typed answer stands for: approve, reject, or the text itself."""
    text = text.strip()
    if not text:
        return None
    if text.lower() in APPROVE:
        return "approve", None
    if text.lower() in REJECT:
        return "reject", None
    return "answer", text


def decision_for(text: str) -> tuple[str, str | None] | None:
    """A person's decision on a gated call: approve, or reject with what follows as reason."""
    word, _, rest = text.strip().partition(" ")
    if word.lower() in APPROVE and not rest:
        return "approved", None
    if word.lower() in REJECT:
        return "rejected", rest.strip() or None
    return None


def edited_or_decision_for(text: str) -> tuple[str, str | None, dict[str, Any] | None] | None:
    """A decision, or an approval with edited arguments: `e {"amount": 129.9}`."""
    word, _, rest = text.strip().partition(" ")
    if word.lower() in EDIT:
        try:
            args = json.loads(rest)
        except ValueError:
            return None
        return ("approved", None, args) if isinstance(args, dict) else None
    decided = decision_for(text)
    return None if decided is None else (*decided, None)


def reply_for(text: str) -> tuple[str, dict[str, Any] | None] | None:
    """A person's reply to a tool server's question: a JSON object accepts with it as
    content, `a` accepts with none (a question that sent them to an address), `d`
    declines, `c` cancels."""
    text = text.strip()
    if text.lower() in APPROVE:
        return "accept", None
    if text.lower() in DECLINE | REJECT:
        return "decline", None
    if text.lower() in CANCEL:
        return "cancel", None
    try:
        content = json.loads(text)
    except json.JSONDecodeError:
        return None
    return ("accept", content) if isinstance(content, dict) else None


def outcome_for(text: str) -> tuple[str, Any, str | None] | None:
    """What became of a call whose outcome is unknown: `ran <result>` (the model reads the
    result), `rerun` (it did not run: run it now, once), `abandon [reason]`."""
    word, _, rest = text.strip().partition(" ")
    word, rest = word.lower(), rest.strip()
    if word == "ran" and rest:
        return "ran", rest, None
    if word == "rerun" and not rest:
        return "did_not_run", None, None
    if word == "abandon":
        return "abandoned", None, rest or None
    return None


class Chat:
    """One person, one conversation; `cursor` is the seq of the last event shown."""

    def __init__(self, client: Client, conversation_id: str, out: TextIO = sys.stdout) -> None:
        self.client, self.cid, self.out = client, conversation_id, out
        self.cursor = 0
        self.names: dict[str, str] = {}
        self.line_of: tuple[str, int] | None = None  # (round, attempt) whose text is on screen
        self.streamed: set[str] = set()  # rounds whose deltas were printed
        self.waiting: set[str] = set()  # calls of the turn that wait for a person or the client

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        """Prompt, turn, prompt …; 0 when the person leaves."""
        conversation = self.client.get_conversation(self.cid)
        self.cursor = conversation.last_seq
        self.names.update({c.tool_call_id: c.name for c in conversation.pending})
        self.say("Ctrl-C interrupts an answer; Ctrl-D or Ctrl-C at an empty prompt leaves.")
        try:
            if conversation.state in ("running", "awaiting_input") and conversation.turn_id:
                self.say(f"the conversation is {conversation.state}; following it")
                self.waiting.update(c.tool_call_id for c in for_someone(conversation.pending))
                turn = self.client.turn(self.cid, conversation.turn_id)
                self.guarded(lambda: self.follow(turn))
            while (line := self.prompt()) is not None:
                if line.strip() in QUIT:
                    break
                if line.strip():
                    self.guarded(lambda: self.turn(line.strip()))
        except Leave:
            self.say("left; a call still waits for an answer (agentq chat "
                     f"{self.cid} to come back)")
        return 0

    def prompt(self) -> str | None:
        """The next line; None on Ctrl-D, or on Ctrl-C with nothing typed."""
        while True:
            try:
                return input(PROMPT)
            except EOFError:
                self.write("\n")
                return None
            except KeyboardInterrupt:
                typed = readline.get_line_buffer() if readline is not None else ""
                self.write("\n")
                if not typed:
                    return None

    def guarded(self, work) -> None:
        """Run a turn; Ctrl-C cancels it on the server, an API error is shown; then the prompt."""
        try:
            work()
        except KeyboardInterrupt:
            self.end_line()
            try:
                self.interrupt()
            except KeyboardInterrupt:
                self.say("stopped following; the turn goes on without you")
            except ClientError as exc:
                self.say(f"error: {exc}")
        except ClientError as exc:
            self.end_line()
            self.say(f"error: {exc}")
        self.end_line()

    def turn(self, text: str) -> None:
        turn = self.client.send(self.cid, text)
        if turn.queued:
            self.say("the conversation is busy: your message waits in its inbox")
        self.follow(turn)

    def follow(self, turn: Turn) -> None:
        """Show the turn from its start (what is shown already is skipped) to its end."""
        for item in turn.stream():
            if isinstance(item, StreamDelta):
                self.show_delta(item)
            elif isinstance(item, StreamRetry):
                self.show_retry(item)
            elif isinstance(item, EventOut):
                if item.seq > self.cursor:  # older events of the turn were shown already
                    self.show_event(item)
                    self.cursor = item.seq
                if item.seq == self.cursor and self.waiting:  # caught up with the log
                    self.ask_waiting()
            elif isinstance(item, StreamEnd):
                if item.state == "failed":
                    self.say(f"the turn failed (see the error above); POST /v1/conversations/{self.cid}"
                             "/retry re-drives it")
                return

    def ask_waiting(self) -> None:
        """Ask the person about each call the turn now waits for (none if it still runs)."""
        conversation = self.client.get_conversation(self.cid)
        if conversation.state != "awaiting_input" or conversation.last_seq > self.cursor:
            return  # more events are on their way down the stream
        for call in for_someone(conversation.pending):
            self.ask(call)

    def interrupt(self) -> None:
        """Cancel the running turn (POST …/cancel), then show what the cancel wrote."""
        self.say("interrupting the turn …")
        try:
            self.client.cancel(self.cid)
        except Conflict as exc:
            self.say(exc.message)
        for event in self.client.iter_events(self.cid, after_seq=self.cursor):
            self.show_event(event)
            self.cursor = event.seq

    # -- a person answers a call ----------------------------------------------------------

    def ask(self, call: PendingCall) -> None:
        """Ask about one pending call until there is an answer, and post it."""
        self.end_line()
        self.names[call.tool_call_id] = call.name
        if call.needs_approval:
            return self.decide(call)
        if call.elicitation is not None:
            return self.reply(call)
        if call.outcome_unknown is not None:
            return self.settle(call)
        self.say(f"? {call_text(call.name, call.args or {})} waits for you "
                 f"({call.executor}, {call.tool_call_id})")
        how, text = self.typed("  [a]pprove / [r]eject / or type an answer: ", answer_for)
        try:
            if how == "approve":
                self.client.approve(self.cid, call.tool_call_id)
            elif how == "reject":
                self.client.reject(self.cid, call.tool_call_id)
            else:
                self.client.answer(self.cid, call.tool_call_id, text)
        except (NotFound, Conflict) as exc:
            self.say(f"  not taken: {exc.message}")
        self.waiting.discard(call.tool_call_id)

    def decide(self, call: PendingCall) -> None:
        """Approve or reject a gated call: it runs as shown (or as edited, when its tool lets
        a person edit), or never. A call this key or user may not decide is left to those
        who may, and said so."""
        listed = {c.tool_call_id: c for c in self.client.tool_calls(self.cid, status="pending")}
        shown = listed.get(call.tool_call_id)
        if shown is not None and shown.may_decide is False and shown.deciders is not None:
            self.say(f"? {call_text(call.name, call.args or {})} waits for "
                     f"{shown.deciders.description} ({call.tool_call_id})")
            self.waiting.discard(call.tool_call_id)
            return
        editable = shown is not None and shown.editable
        self.say(f"? {call_text(call.name, call.args or {})} needs your approval "
                 f"({call.tool_call_id})")
        prompt = f"  [a]pprove / {'[e]dit {json} / ' if editable else ''}[r]eject [reason]: "
        while True:
            status, reason, args = self.typed(prompt, edited_or_decision_for)
            try:
                if status == "approved":
                    self.client.approve(self.cid, call.tool_call_id, args=args)
                else:
                    self.client.reject(self.cid, call.tool_call_id, reason)
            except InvalidRequest as exc:  # edits that do not fit, or a tool that takes none
                self.say(f"  not taken: {exc.message}")
                continue
            except (NotFound, Conflict, Forbidden) as exc:
                self.say(f"  not taken: {exc.message}")
            break
        self.waiting.discard(call.tool_call_id)

    def settle(self, call: PendingCall) -> None:
        """Say what became of a `once` call whose run was found started and unfinished."""
        found = call.outcome_unknown or {}
        self.say(f"? {call_text(call.name, call.args or {})} may or may not have run "
                 f"({call.tool_call_id}): started {found.get('started_at')} on "
                 f"{found.get('worker')}, found unfinished {found.get('ran_s')} s later")
        if found.get("description"):
            self.say(f"  {found['description']}")
        if found.get("reconcile"):
            self.say(f"  its reconcile could not tell: {found['reconcile']}")
        outcome, result, reason = self.typed(
            "  ran <result> / rerun (it did not run) / abandon [reason]: ", outcome_for)
        try:
            self.client.settle(self.cid, call.tool_call_id, outcome, result, reason=reason)
        except (NotFound, Conflict, InvalidRequest) as exc:
            self.say(f"  not taken: {exc.message}")
        self.waiting.discard(call.tool_call_id)

    def reply(self, call: PendingCall) -> None:
        """Answer the question a call's tool server asked; a reply that does not fit what
        it asked for is shown, and asked for again."""
        question = call.elicitation
        assert question is not None  # ask() sends only a call with a question here
        fields = ", ".join((question.requested_schema or {}).get("properties") or {})
        self.say(f"? {call_text(call.name, call.args or {})} asks: {question.message}"
                 f" ({f'fields: {fields}' if fields else question.url or call.tool_call_id})")
        while True:
            action, content = self.typed("  a JSON object (or [a]ccept) / [d]ecline / [c]ancel: ",
                                         reply_for)
            try:
                self.client.reply(self.cid, call.tool_call_id, content, action=action)
            except InvalidRequest as exc:
                self.say(f"  not taken: {exc.message}")
                continue
            except (NotFound, Conflict) as exc:
                self.say(f"  not taken: {exc.message}")
            break
        self.waiting.discard(call.tool_call_id)

    def typed(self, prompt: str, parse: Callable[[str], T | None]) -> T:
        """What the person types at `prompt`, parsed; asked again until it parses. Ctrl-D leaves."""
        while True:
            try:
                parsed = parse(input(prompt))
            except EOFError:
                self.write("\n")
                raise Leave() from None
            if parsed is not None:
                return parsed

    # -- what the person sees ------------------------------------------------------------

    def show_delta(self, delta: StreamDelta) -> None:
        key = (delta.round_id, delta.attempt)
        if self.line_of != key:
            self.end_line()
            self.write(AGENT)
            self.line_of = key
            self.streamed.add(delta.round_id)
        self.write(delta.text)

    def show_retry(self, retry: StreamRetry) -> None:
        self.end_line()
        if retry.attempt is None:  # held: a breaker is open, or a budget is spent
            self.say(f"  · waiting until {retry.until}: {retry.error}")
            return
        self.say(f"  · the provider failed ({retry.error}); attempt {retry.attempt + 1} "
                 f"in {retry.next_delay_s:.1f} s")

    def show_event(self, event: EventOut) -> None:
        content = event.content
        kind = event.type
        if kind == "tool_call":
            self.names[content["tool_call_id"]] = content["name"]
        waiting_after(self.waiting, event)
        if kind == "assistant_msg":
            self.show_answer(event)
        elif kind != "user_msg":
            self.end_line()
            self.say(f"  · {kind.replace('_', ' ')}: {summarize(event.model_dump(mode='json'), self.names)}")

    def show_answer(self, event: EventOut) -> None:
        """End the streamed line, or print the whole text when no delta of it was seen."""
        content = event.content
        interrupted = " [interrupted]" if content.get("interrupted") else ""
        round_id = event.round_id or ""
        if round_id in self.streamed:
            if self.line_of is not None and self.line_of[0] == round_id:
                self.write(interrupted)
                self.end_line()
            elif interrupted:
                self.say("  · the answer was interrupted")
            return
        if content.get("text") or interrupted:
            self.end_line()
            self.say(f"{AGENT}{content.get('text', '')}{interrupted}")

    def end_line(self) -> None:
        if self.line_of is not None:
            self.write("\n")
            self.line_of = None

    def say(self, text: str) -> None:
        self.write(text + "\n")

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


def parse_settings(raw: str | None) -> dict[str, Any]:
    """`--settings`: a JSON object, inline or `@path` to a file. Raises ValueError when not one."""
    if not raw:
        return {}
    text = raw
    if raw.startswith("@"):
        try:
            with open(raw[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ValueError(f"cannot read settings file {raw[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--settings is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("--settings must be a JSON object")
    return value
