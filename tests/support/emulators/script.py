"""What an emulator does with the next request: answer, fail, stall, or drop the connection."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """A tool call the model makes; `args` as a string is sent as is (it may be bad JSON)."""

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)

    @property
    def args_text(self) -> str:
        return self.args if isinstance(self.args, str) else json.dumps(self.args)


@dataclass(frozen=True)
class Reply:
    """A streamed answer: text in `chunks` pieces, then tool calls, then the end.

    `hold` stops after the text and waits for the client to hang up; `error` ends the
    stream with an error event of that type instead of finishing; `cut` resets the
    connection after the text; `stop_early` ends the body cleanly there, unfinished.
    """

    text: str = "ok"
    calls: tuple[Call, ...] = ()
    chunks: int = 3
    delay_s: float = 0.0
    thinking: str = ""  # Anthropic: a thinking block, when the request enables thinking
    redacted: bool = False  # Anthropic: a redacted_thinking block after it
    finish: str | None = None
    hold: bool = False
    error: str | None = None
    cut: bool = False
    stop_early: bool = False


@dataclass(frozen=True)
class Fail:
    """An HTTP error answer in the provider's own error shape."""

    status: int
    message: str = "injected failure"
    type: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reset:
    """Drop the connection without answering (the client sees a reset)."""


@dataclass(frozen=True)
class Stall:
    """Say nothing for `seconds` (or until the client leaves), then answer `then`."""

    seconds: float
    then: Reply = field(default_factory=Reply)


@dataclass(frozen=True)
class ByRequest:
    """Answer with what `choose` picks for the request body: a model that reads its input."""

    choose: Callable[[dict[str, Any]], Reply | Fail | Reset | Stall]


Action = Reply | Fail | Reset | Stall | ByRequest


def pieces(text: str, count: int) -> list[str]:
    """`text` in at most `count` non-empty pieces."""
    if not text:
        return []
    size = max(1, -(-len(text) // max(count, 1)))
    return [text[i:i + size] for i in range(0, len(text), size)]


def estimate_tokens(value: Any) -> int:
    """About four characters of JSON a token, as a provider's tokenizer roughly counts."""
    return len(json.dumps(value, ensure_ascii=False)) // 4
