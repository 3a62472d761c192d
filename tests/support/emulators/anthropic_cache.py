"""Prompt caching in the Anthropic emulator, as the Messages API documents it.

- CACHE_BREAKPOINTS: at most 4 blocks may carry `cache_control`.
- The cached prefix runs tools → system → messages, block by block. A breakpoint writes
  the prefix up to and including its block (`cache_creation_input_tokens`); a request
  reads the longest prefix written before (`cache_read_input_tokens`) that ends at one of
  its breakpoints or up to 20 blocks before one (the API's lookback); the rest is
  `input_tokens`. `cache_control` itself is not part of the prefix. (The minimum cacheable
  length of a real model is not modelled: every breakpoint caches.)
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.support.emulators.script import estimate_tokens

CACHE_BREAKPOINTS = "A maximum of 4 blocks with cache_control may be provided. Found {found}."
LOOKBACK_BLOCKS = 20


def _blocks(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The request in prefix order, each block with where it sits."""
    out: list[tuple[Any, ...]] = [("tool", t) for t in body.get("tools") or ()]
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        out += [("system", b) for b in system]
    for index, message in enumerate(body["messages"]):
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out += [("message", index, message["role"], b) for b in blocks]
    return out


def _marked(block: tuple[Any, ...]) -> bool:
    return isinstance(block[-1], dict) and "cache_control" in block[-1]


def _plain(block: tuple[Any, ...]) -> str:
    last = {k: v for k, v in block[-1].items() if k != "cache_control"} if isinstance(block[-1], dict) else block[-1]
    return json.dumps([*block[:-1], last], sort_keys=True)


def breakpoints_problem(body: dict[str, Any]) -> str | None:
    """CACHE_BREAKPOINTS."""
    found = sum(_marked(b) for b in _blocks(body))
    return CACHE_BREAKPOINTS.format(found=found) if found > 4 else None


class PromptCache:
    """The prefixes written so far, and the usage each request gets from them."""

    def __init__(self) -> None:
        self._written: set[str] = set()

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = _blocks(body)
        hashes, totals = [], []
        digest, total = hashlib.sha256(), 0
        for block in blocks:
            digest.update(_plain(block).encode())
            hashes.append(digest.copy().hexdigest())
            total += estimate_tokens(json.loads(_plain(block)))
            totals.append(total)
        marks = [i for i, block in enumerate(blocks) if _marked(block)]
        read_at = -1
        for mark in marks:
            for position in range(mark, max(-1, mark - LOOKBACK_BLOCKS), -1):
                if hashes[position] in self._written:
                    read_at = max(read_at, position)
                    break
        read = totals[read_at] if read_at >= 0 else 0
        written = totals[marks[-1]] - read if marks and marks[-1] > read_at else 0
        self._written.update(hashes[mark] for mark in marks)
        return {"input_tokens": total - read - written, "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written}
