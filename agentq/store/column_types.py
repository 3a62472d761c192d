"""The column types whose storage differs by dialect: timestamps and JSON, each loading back
equal to what was stored, and JSON read back as its text.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Dialect, String, Text, cast
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator, TypeEngine

from agentq.store import dialects


class Timestamp(TypeDecorator[datetime]):
    """A UTC-aware datetime that loads back equal to what was stored (inv. 7).

    SQLite has no datetime type, so it stores the fixed-width `format_ts` text, whose
    text order is time order; PostgreSQL stores TIMESTAMPTZ, exact to the microsecond.
    """

    impl = String(27)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(dialects.of(dialect).timestamp_type())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        return None if value is None else dialects.of(dialect).timestamp_in()(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else dialects.of(dialect).timestamp_out()(value)


# JSON on SQLite, JSONB on PostgreSQL; Python None is SQL NULL.
Json = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


class JsonText(TypeDecorator[Any]):
    """JSON written as JSON and read back as its text, undecoded.

    For a document read on every step that seldom changes (a conversation's settings): its
    reader decodes it only when the text differs from the one it decoded last, so a step
    costs the same however long the settings are. PostgreSQL renders a jsonb value as one
    text, the same for the same value; SQLite keeps the text it was given.
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return Json.dialect_impl(dialect)

    def column_expression(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        return cast(column, Text)

    def result_processor(self, dialect: Dialect, coltype: Any) -> None:
        return None  # the text as the database sent it
