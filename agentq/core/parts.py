"""Content parts of a user message: text and images, checked before anything is written.

A message's `content` is text, or a list of parts: `{"type": "text", "text"}` and
`{"type": "image", "url"}` (https only, on a host DNS can hold and never a private,
loopback or link-local one: the provider or a self-hosted model server fetches it) or
`{"type": "image", "media_type", "data"}` (base64 of a PNG, JPEG, GIF or WebP, at most
`max_image_bytes`, its bytes what its media type says). The user_msg keeps the joined text
as `text` and the parts as `parts`; the renderer gives each API its own image shape.
"""
from __future__ import annotations

import base64
import binascii
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from agentq.core.hosts import UNRESOLVABLE, dns_name

MEDIA_TYPES = {  # the image types both APIs take, and how their bytes begin
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
MAX_PARTS = 20
MAX_URL_CHARS = 2048
IMAGE_TOKENS = 1600  # what one image costs a model at most, about (Anthropic: ~1600 tokens)
_LOCAL_NAMES = ("localhost", ".localhost", ".local", ".internal", ".lan", ".home.arpa")


class BadContent(ValueError):
    """The message content breaks a rule; the message says which, for the client."""


def read_content(content: Any, *, max_image_bytes: int) -> dict[str, Any]:
    """`{"text"}` or `{"text", "parts"}` for a user_msg, from text or a list of parts."""
    if isinstance(content, str):
        if not content.strip():
            raise BadContent("content must not be empty")
        return {"text": content}
    if not isinstance(content, list) or not content:
        raise BadContent("content must be text or a non-empty list of parts")
    if len(content) > MAX_PARTS:
        raise BadContent(f"content may hold at most {MAX_PARTS} parts")
    parts = [_part(f"content[{i}]", part, max_image_bytes) for i, part in enumerate(content)]
    text = "\n".join(p["text"] for p in parts if p["type"] == "text")
    return {"text": text, "parts": parts}


def _part(where: str, part: Any, max_image_bytes: int) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        _only(where, part, {"type", "text"})
        if not isinstance(part.get("text"), str) or not part["text"].strip():
            raise BadContent(f"{where}.text must be non-empty text")
        return {"type": "text", "text": part["text"]}
    if kind != "image":
        raise BadContent(f"{where}.type must be 'text' or 'image'")
    if "url" in part:
        _only(where, part, {"type", "url"})
        return {"type": "image", "url": _image_url(where, part["url"])}
    _only(where, part, {"type", "media_type", "data"})
    return {"type": "image", **_image_data(where, part.get("media_type"), part.get("data"),
                                           max_image_bytes)}


def _only(where: str, part: dict[str, Any], fields: set[str]) -> None:
    extra = sorted(set(part) - fields)
    if extra:
        raise BadContent(f"{where} has unknown fields: {', '.join(extra)}")


def _image_url(where: str, url: Any) -> str:
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS:
        raise BadContent(f"{where}.url must be a URL of at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".").lower()
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise BadContent(f"{where}.url is not a valid URL") from None
    if parts.scheme != "https" or not host:
        raise BadContent(f"{where}.url must be an https URL")
    if parts.username or parts.password:
        raise BadContent(f"{where}.url must not carry credentials")
    if dns_name(host) is None:
        raise BadContent(f"{where}.url {UNRESOLVABLE}")
    if _local(host):
        raise BadContent(f"{where}.url must not point at a private, loopback or link-local host")
    return url


def _local(host: str) -> bool:
    """A host that names this machine or a private network (as a name or an address)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:  # a name: one label, or a name kept for local networks
        return host == "localhost" or host.endswith(_LOCAL_NAMES) or "." not in host
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return not address.is_global or address.is_multicast


def _image_data(where: str, media_type: Any, data: Any, max_image_bytes: int) -> dict[str, str]:
    if not isinstance(media_type, str) or media_type not in MEDIA_TYPES:  # {} is unhashable
        raise BadContent(f"{where}.media_type must be one of {', '.join(MEDIA_TYPES)}")
    if not isinstance(data, str) or not data:
        raise BadContent(f"{where}.data must be base64 text")
    if len(data) * 3 // 4 > max_image_bytes + 2:
        raise BadContent(f"{where}: the image is larger than {max_image_bytes} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadContent(f"{where}.data is not valid base64") from None
    if len(raw) > max_image_bytes:
        raise BadContent(f"{where}: the image is larger than {max_image_bytes} bytes")
    if not raw.startswith(MEDIA_TYPES[media_type]) or (
            media_type == "image/webp" and raw[8:12] != b"WEBP"):
        raise BadContent(f"{where}.data is not a {media_type} image")
    return {"media_type": media_type, "data": data}


def image_part(where: str, media_type: Any, data: Any, max_image_bytes: int) -> dict[str, str]:
    """`{"type": "image", "media_type", "data"}` if the base64 image passes a user image's
    rules (type, size, bytes that are what the type says); BadContent saying why if not."""
    return {"type": "image", **_image_data(where, media_type, data, max_image_bytes)}


def images_of(parts: Any) -> int:
    """How many images a message's parts hold."""
    return sum(1 for p in parts or () if isinstance(p, dict) and p.get("type") == "image")
