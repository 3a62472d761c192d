"""The shapes of /v1/conversations/<id>/messages: a user message, its parts, and the answer
that names its turn."""
from __future__ import annotations

import sys
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PlainValidator,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from agentq.api.common import AnswerModel, BodyModel, RequestModel, Text, Timestamp, Token
from agentq.core.events import OnBusy
from agentq.core.parts import BadContent, read_content


class TextPart(BodyModel):
    type: Literal["text"]
    text: Text


class ImageURLPart(BodyModel):
    """An image the provider fetches: https, and not on a private or local host."""

    type: Literal["image"]
    url: Annotated[str, StringConstraints(min_length=9, max_length=2048, pattern=r"^https://")]


# Base64 as `base64.b64decode(validate=True)` takes it: groups of four, padded at the end.
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


class ImageDataPart(BodyModel):
    """An image in the message: base64 of its bytes, at most settings.limits.max_image_bytes."""

    type: Literal["image"]
    media_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
    data: Annotated[str, StringConstraints(min_length=1, pattern=BASE64)]


ContentPart = TextPart | ImageURLPart | ImageDataPart
_PARTS = TypeAdapter(Annotated[list[ContentPart], Field(min_length=1, max_length=20)])
_TEXT = TypeAdapter(Text)


def _content(value: Any) -> str | list[dict[str, Any]]:
    """Text, or a list of parts; one error at `content` saying what is wrong."""
    if isinstance(value, str):
        try:
            return _TEXT.validate_python(value, strict=True)
        except ValidationError:
            raise ValueError("must be non-blank text or a list of parts") from None
    if not isinstance(value, list):
        raise ValueError("must be non-blank text or a list of parts")
    try:
        parts = _PARTS.validate_python(value, strict=True)
    except ValidationError as exc:
        try:  # the rule it breaks, as the log's own check says it (an https URL, a media type…)
            read_content(value, max_image_bytes=sys.maxsize)
        except BadContent as bad:
            raise PydanticCustomError("invalid_content", str(bad)) from None
        first = exc.errors(include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"] if not str(p).endswith("Part"))
        raise ValueError(f"part {where}: {first['msg']}") from None
    return [part.model_dump() for part in parts]


def _part_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


Content = Annotated[Any, PlainValidator(_content), WithJsonSchema({"oneOf": [
    {**_TEXT.json_schema(), "description": "the message text"},
    {"type": "array", "minItems": 1, "maxItems": 20, "description": "text and image parts",
     "items": {"oneOf": [_part_schema(m) for m in (TextPart, ImageURLPart, ImageDataPart)]}},
]})]


class PostMessage(BodyModel):
    """A user message: text, or a list of text and image parts. `created_at` defaults to the
    time it arrives."""

    content: Content
    on_busy: OnBusy = "enqueue"
    created_at: Timestamp | None = None


class MessageHeaders(RequestModel):
    idempotency_key: Token | None = Field(None, alias="Idempotency-Key")


class MessageAnswer(AnswerModel):
    """The message's turn is named at once, also while it waits in the inbox (`queued`)."""

    message_id: str
    turn_id: str | None = Field(description="the turn the message starts (null only for a "
                                            "message queued before turns were named at once)")
    queued: bool
