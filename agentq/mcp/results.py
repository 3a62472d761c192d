"""A `tools/call` result as a tool_result's status and output, faithfully but as JSON.

Text alone stays text (what a local tool returning a string gives); structured content,
several blocks, images or resources become an object the model reads as JSON. An image
that passes a user image's rules (core/parts.py) is kept as a content part of the
tool_result, which the model sees as an image where its API takes images in tool results;
the output names it (`"part": n`). Audio and binary resources are described, not kept.
Structured content whose text blocks only repeat it as JSON is the output itself, like a
local tool's returned dict. `isError` is an error result, as the specification asks, so
the model can read why and correct itself.
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

from agentq.core.parts import BadContent, image_part
from agentq.tools.remote import RemoteResult

MAX_IMAGE_BYTES = 5_000_000  # an image a model API takes at most (a user's, by default)


def outcome(result: CallToolResult, *, max_image_bytes: int = MAX_IMAGE_BYTES) -> RemoteResult:
    """The result's status, output and image parts."""
    parts: list[dict[str, Any]] = []
    blocks = [_image(block, parts, max_image_bytes) if isinstance(block, ImageContent)
              else _block(block) for block in result.content]
    status, output = _output(result, blocks)
    return RemoteResult(status, output, tuple(parts))


def _image(block: ImageContent, parts: list[dict[str, Any]], max_image_bytes: int
           ) -> dict[str, Any]:
    """The image's block in the output; the image itself added to `parts` if it may be one."""
    described = _block(block)
    try:
        part = image_part("image", block.mime_type, block.data, max_image_bytes)
    except BadContent as exc:
        return {**described, "note": f"image not shown: {exc}"}
    parts.append(part)
    del described["note"]
    return {**described, "part": len(parts) - 1}


def _output(result: CallToolResult, blocks: list[dict[str, Any]]) -> tuple[str, Any]:
    status = "error" if result.is_error else "ok"
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
