"""What every resource of the HTTP API shares: the bases of its models, its scalars, its errors.

The models of agentq/api are the contract between the server (agentq.web validates with them
and answers through them, and makes /openapi.json from them) and the SDK (agentq.client reads
the answers with them). Careful: this package imports pydantic, the standard library and
agentq.core only, so that a client can import it without the server (tests/test_layering.py).
"""
from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, PlainValidator, StringConstraints, WithJsonSchema

MAX_SEQ = 2**31 - 1
ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,255}$"
States = Literal["idle", "running", "awaiting_input", "failed", "ended"]

# Printable text without control characters: what a header or a cursor may carry.
Token = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
# Every character Python's str.strip() or a JSON-schema `\s` calls space, spelled out, so the
# schema's pattern and the server agree exactly on what blank means.
SPACE = r"\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
Text = Annotated[str, StringConstraints(min_length=1, pattern=f"[^{SPACE}]")]
RFC3339 = (
    r"^2[0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)


def _timestamp(value: Any) -> datetime:
    """An RFC 3339 text with a year 2000–2999, in UTC (the stored text is fixed-width, inv. 7)."""
    if not isinstance(value, str) or not re.fullmatch(RFC3339, value):
        raise ValueError("must be an RFC 3339 timestamp with an offset and a year from 2000 to "
                         "2999, like 2026-11-21T22:14:03.123456Z")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise ValueError("is not a date and time that exists") from None


Timestamp = Annotated[
    datetime,
    PlainValidator(_timestamp),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339}),
]


class RequestModel(BaseModel):
    """A query or the headers of a request: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BodyModel(RequestModel):
    """A JSON body: its numbers and booleans are what they say (`true` is not 1, `"0"` not 0).

    Queries and headers stay lax: their values arrive as text.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class AnswerModel(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorBody(AnswerModel):
    code: str
    message: str
    details: Any = None


class ErrorAnswer(AnswerModel):
    error: ErrorBody
