"""JSON from PostgreSQL decoded as the UTF-8 it is, without `json.loads` guessing.

psycopg hands each json and jsonb value to `json.loads` as bytes, which first guesses their
encoding (UTF-8, -16 or -32, from the first bytes) and then checks its argument's type: a
third of what a step spent decoding the JSON it reads (its state, its events), for text
that is UTF-8 whenever the connection's encoding is. Decoded the same way, with the same
decoder; a connection in another encoding keeps psycopg's default.
"""
from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg.types.json import set_json_loads

_DECODER = json.JSONDecoder()  # what json.loads uses when given no options


def json_from_utf8(data: str | bytes) -> Any:
    """`json.loads(data)` for bytes known to be UTF-8 (psycopg passes bytes)."""
    return _DECODER.decode(data if isinstance(data, str) else data.decode("utf-8", "surrogatepass"))


def decode_json_as_utf8(connection: psycopg.Connection[Any]) -> None:
    """Let the connection decode json and jsonb with `json_from_utf8` if it speaks UTF-8."""
    if connection.info.encoding == "utf-8":
        set_json_loads(json_from_utf8, connection)
