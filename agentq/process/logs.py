"""Log lines that say which step they belong to: plain text or one JSON object per line.

A worker task opens a `log_context` for its conversation; the runtime `bind`s the step
key, kind and round id once it has claimed a step. Every line logged inside carries
them, in JSON as fields and in plain text as `key=value` after the message, so an
operator can follow one conversation or one step across processes.
"""
from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

from agentq.core.timefmt import format_ts

LOG_FORMATS = ("plain", "json")
CONTEXT_FIELDS = ("conversation_id", "step_key", "step_kind", "round_id")
PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# None outside every `log_context`: a `bind` there would outlive the step it names.
_context: ContextVar[Mapping[str, str] | None] = ContextVar("agentq_log_context", default=None)
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", *CONTEXT_FIELDS,
}


@contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Within the block, log lines carry `fields`; whatever is bound inside ends with it."""
    token = _context.set(_merged(fields))
    try:
        yield
    finally:
        _context.reset(token)


def bind(**fields: str | None) -> None:
    """Set `fields` (None clears one) until the enclosing `log_context` ends; none: no-op."""
    if _context.get() is not None:
        _context.set(_merged(fields))


def current_context() -> Mapping[str, str]:
    return _context.get() or {}


def _merged(fields: Mapping[str, str | None]) -> dict[str, str]:
    merged = {**current_context(), **fields}
    return {k: v for k, v in merged.items() if v is not None}


class ContextFilter(logging.Filter):
    """Stamps the log context on each record, in the thread that logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = current_context()
        for name in CONTEXT_FIELDS:
            if not hasattr(record, name):
                setattr(record, name, context.get(name))
        return True


def _fields(record: logging.LogRecord) -> dict[str, object]:
    """The context fields the record carries, then its `extra=` values."""
    found: dict[str, object] = {}
    for name in CONTEXT_FIELDS:
        value = getattr(record, name, None)
        if value is None:
            value = current_context().get(name)
        if value is not None:
            found[name] = value
    for name, value in vars(record).items():
        if name not in _STANDARD and not name.startswith("_"):
            found[name] = value
    return found


class PlainFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value …`, the context and extras at the end."""

    def __init__(self) -> None:
        super().__init__(PLAIN)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        pairs = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        return f"{line} {pairs}" if pairs else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, context, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": format_ts(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def formatter_for(log_format: str) -> logging.Formatter:
    """The formatter of AGENTQ_LOG_FORMAT `log_format` (`plain` or `json`)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    return JsonFormatter() if log_format == "json" else PlainFormatter()


def use_format(logger: logging.Logger, log_format: str) -> None:
    """Give every handler of `logger` agentq's formatter and context filter.

    For handlers someone else made: Celery's on the root and task loggers, gunicorn's
    on its error and access logs. Python warnings go through logging too, so they come
    out in the same format instead of as bare text on stderr.
    """
    logging.captureWarnings(True)
    formatter = formatter_for(log_format)
    for handler in logger.handlers:
        handler.setFormatter(formatter)
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())


class _StderrHandler(logging.StreamHandler):
    """The handler `configure` installs, so a second call replaces it and nothing else."""


def configure(log_format: str, *, level: int | str = logging.WARNING) -> None:
    """Log to stderr at `level` in `log_format` (what the agentq command and gunicorn call)."""
    logging.captureWarnings(True)
    root = logging.getLogger()
    handler = _StderrHandler(sys.stderr)
    handler.setFormatter(formatter_for(log_format))
    handler.addFilter(ContextFilter())
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
