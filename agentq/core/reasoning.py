"""Reasoning items: what a provider returns besides text and tool calls, kept verbatim.

Anthropic's `thinking` / `redacted_thinking` blocks (with their signatures) and OpenAI's
reasoning items must go back to the same API exactly as returned, or the next round is
refused. They live on the assistant_msg as `reasoning`: a list of
`{"provider": <kind>, "item": <the provider's block>, "index": <its position>}`, where
`index` is the item's place among the response's content blocks (a provider that
interleaves reasoning with text and tool calls gets them back in that order). A provider
of another kind never sees them (a profile switch or a fork onto another API drops them).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reasoning:
    """One reasoning item of one response, as `provider` (a provider kind) returned it."""

    provider: str
    item: dict[str, Any]
    index: int | None = None

    def as_content(self) -> dict[str, Any]:
        """The item as the log keeps it on the assistant_msg."""
        out: dict[str, Any] = {"provider": self.provider, "item": self.item}
        if self.index is not None:
            out["index"] = self.index
        return out


def reasoning_of(content: dict[str, Any]) -> tuple[Reasoning, ...]:
    """The reasoning items of an assistant_msg's content; anything malformed is left out."""
    found = []
    for entry in content.get("reasoning") or ():
        if not isinstance(entry, dict):
            continue
        provider, item, index = entry.get("provider"), entry.get("item"), entry.get("index")
        if isinstance(provider, str) and isinstance(item, dict):
            found.append(Reasoning(provider, item, index if isinstance(index, int) else None))
    return tuple(found)


def for_provider(items: Iterable[Reasoning], kind: str) -> list[Reasoning]:
    """The items `kind` may be sent back: its own, never another API's."""
    return [item for item in items if item.provider == kind]


def interleave(blocks: Sequence[dict[str, Any]], items: Iterable[Reasoning]) -> list[dict[str, Any]]:
    """`blocks` (text and tool calls, in order) with each item put back at its `index`;
    an item without one goes first, where reasoning comes in a response."""
    out = list(blocks)
    unplaced = 0
    positioned = []
    for item in items:
        if item.index is None:
            positioned.append((unplaced, item))
            unplaced += 1
        else:
            positioned.append((max(item.index, 0), item))
    for position, item in sorted(positioned, key=lambda pair: pair[0]):
        out.insert(min(position, len(out)), item.item)
    return out
