"""The column types whose storage differs by dialect: timestamps and JSON, each loading back
equal to what was stored.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Dialect, String
from sqlalchemy.dialects.postgresql import JSONB
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
