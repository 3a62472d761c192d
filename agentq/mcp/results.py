"""A `tools/call` result as a tool_result's status and output, faithfully but as JSON.

Text alone stays text (what a local tool returning a string gives); structured content,
several blocks, images or resources become an object the model reads as JSON. An image's
bytes are not put in the log (a tool result holds no parts a model would see as an
image): the model reads its type and size. Structured content whose text blocks only
repeat it as JSON is the output itself, like a local tool's returned dict. `isError` is
an error result, as the specification asks, so the model can read why and correct itself.
"""
from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)


def outcome(result: CallToolResult) -> tuple[str, Any]:
    """("ok" | "error", output) of a result."""
    status = "error" if result.is_error else "ok"
    blocks = [_block(block) for block in result.content]
    structured = result.structured_content
    if structured is not None and all(b.get("type") == "text" for b in blocks):
        text = "\n".join(b["text"] for b in blocks)
        if structured == {"result": text}:  # a plain value wrapped to fit an output schema
            return status, text
        if _repeats(text, structured):  # the text only repeated it, as JSON
            return status, structured
    if result.structured_content is None and all(b.get("type") == "text" for b in blocks):
        return status, "\n".join(b["text"] for b in blocks)
    output: dict[str, Any] = {"content": blocks}
    if result.structured_content is not None:
        output["structured"] = result.structured_content
    return status, output


def _repeats(text: str, structured: Any) -> bool:
    """Whether the text is the serialization of the structured content (the spec's advice
    for clients that read only text): keeping both would say it twice."""
    try:
        return bool(json.loads(text) == structured)
    except ValueError:
        return False


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent | AudioContent):
        return {"type": block.type, "media_type": block.mime_type, "bytes": _size(block.data),
                "note": f"{block.type} not shown"}
    if isinstance(block, ResourceLink):
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    if isinstance(block, EmbeddedResource):
        found = block.resource
        text = found.text if isinstance(found, TextResourceContents) else None
        return {"type": "resource", "uri": str(found.uri), "mime_type": found.mime_type,
                **({"text": text} if text is not None else {"note": "binary resource not shown"})}
    return {"type": getattr(block, "type", "unknown")}


def _size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None
