"""A lone statement on PostgreSQL: compiled and typed by SQLAlchemy, run on the pooled
connection without a SQLAlchemy Connection around it.

Most of a step's statements need no transaction (its claim, its commit, its view's reads:
`begin_write(one_statement=True)`, `begin_read(one_snapshot=False)`), and on PostgreSQL they
run in autocommit. For those SQLAlchemy's Connection has only bookkeeping left to do: a
Connection and a transaction made, committed and closed, an execution context, a cursor
result and its rows. Counted with cachegrind, a one-row read took 540,000 instructions that
way and 310,000 on the pooled psycopg connection (the pool's checkout and checkin included):
the bookkeeping cost as much again as psycopg's own work, ten times a turn.

`LoneConnection` keeps what SQLAlchemy does that matters to a statement: its compiled form,
from the engine's compiled cache; the bind processors and escaped names of its parameters;
its result columns' keys and result processors; the wrapping of a driver's error in
SQLAlchemy's exceptions, and the invalidation of a connection that was lost. A statement
built once and run often (agentq keeps its hot ones as constants) is also bound in one pass
over a plan made once, instead of SQLAlchemy's `construct_params`, which relates the
statement's own parameters to its compiled form's at every run: for a step's commit, with
about eighty parameters, that was 8% of the instructions of an in-process turn. Anything else a
caller asks of it (text or DDL, many parameter sets, a statement with execution options or
expanding parameters; any statement while something listens to the engine's statements, as
the tests and benchmarks that count them do, or once anything has listened on the Connection
class; what follows a driver's error) goes through a SQLAlchemy Connection made on the same
pooled connection, and every later statement of the block with it.

Careful: mirrors `Connection._execute_clauseelement`, `SQLCompiler.construct_params` and
`DefaultExecutionContext._init_compiled` of SQLAlchemy 2.1 (pinned in pyproject.toml), and
uses the compiled form's `bind_names`, `cache_key`, `_bind_processors`, `_result_columns` and
`escaped_bind_names`. tests/store/test_lone.py checks the results against SQLAlchemy's own.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, NoReturn
from weakref import WeakKeyDictionary

from sqlalchemy import CompoundSelect, Connection, Delete, Engine, Insert, Select, Update
from sqlalchemy.exc import InvalidRequestError, MultipleResultsFound, NoResultFound
from sqlalchemy.sql import compiler

from agentq.store import idle_connections

# What runs on the pooled connection; anything else goes through SQLAlchemy's Connection.
_LONE_KINDS = (Select, CompoundSelect, Insert, Update, Delete)


class LoneConnection:
    """A pooled connection in autocommit that runs Core statements as a SQLAlchemy
    Connection would (`execute`), and is one for everything else it is asked."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect
        self._pooled = idle_connections.checkout(engine)
        self._connection: Connection | None = None
        # the cache SQLAlchemy's own execute would use: the engine's option, if it sets one
        self._compiled_cache = engine.get_execution_options().get(
            "compiled_cache", engine._compiled_cache)

    def execute(self, statement: Any, parameters: Any = None, **options: Any) -> Any:
        """The statement's result, as `Connection.execute` gives it."""
        if (self._connection is not None or options or not isinstance(statement, _LONE_KINDS)
                or statement._execution_options or Connection._has_events
                or (self.engine._has_events and _listened(self.engine))
                or not (parameters is None or isinstance(parameters, dict))):
            return self._sqlalchemy().execute(statement, parameters, **options)
        params = parameters or {}
        compiled: Any
        compiled, extracted, collected, _hit = statement._compile_w_cache(
            dialect=self.dialect, compiled_cache=self._compiled_cache,
            column_keys=sorted(params),
            linting=self.dialect.compiler_linting | compiler.WARN_LINTING)
        form = _form(compiled)
        if form is None:
            return self._sqlalchemy().execute(statement, parameters)
        if form.binds is not None and not collected and (
                not extracted or extracted is compiled.cache_key[1]):
            bound = form.bind(params)
        else:  # a statement built anew, its values in its own parameters: SQLAlchemy binds
            values = compiled.construct_params(params, extracted_parameters=extracted,
                                               escape_names=False, _collected_params=collected)
            processors, escaped = form.bind_processors, form.escaped_names
            bound = {escaped.get(key, key): processors[key](value) if key in processors
                     else value for key, value in values.items()}
        cursor = None
        try:
            cursor = self._pooled.cursor()
            cursor.execute(form.encoded(self._encoding()), bound)
            description = cursor.description
            fetched = cursor.fetchall() if description is not None else []
            rowcount = cursor.rowcount
            cursor.close()
        except BaseException as exc:
            self._raise(exc, form.sql, bound, cursor)
        if description is None:
            return LoneResult([], rowcount)
        return LoneResult(form.rows(self.dialect, description, fetched), rowcount)

    def scalar(self, statement: Any, parameters: Any = None, **options: Any) -> Any:
        return self.execute(statement, parameters, **options).scalar()

    def scalars(self, statement: Any, parameters: Any = None, **options: Any) -> Any:
        return self.execute(statement, parameters, **options).scalars()

    @property
    def connection(self) -> Any:
        """The pooled connection, as `Connection.connection` is."""
        return self._pooled

    def _sqlalchemy(self) -> Connection:
        """A SQLAlchemy Connection on this pooled connection, made once when first needed."""
        if self._connection is None:
            self._connection = Connection(self.engine, connection=self._pooled)
        return self._connection

    def close(self) -> None:
        """Give the pooled connection back (through the Connection, if one was made), or
        keep it idle for the process's next statement (agentq.store.idle_connections)."""
        if self._connection is not None:
            self._connection.close()
        else:
            idle_connections.keep(self.engine, self._pooled)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqlalchemy(), name)

    def _encoding(self) -> str:
        driver = self._pooled.driver_connection
        assert driver is not None, "a checked-out connection has its driver's"
        return str(driver.info.encoding)

    def _raise(self, exc: BaseException, sql: str, bound: Mapping[str, Any],
               cursor: Any) -> NoReturn:
        """What SQLAlchemy raises for `exc` (a driver's error wrapped), having invalidated
        the pooled connection if it was lost, as a Connection's execute would."""
        self._sqlalchemy()._handle_dbapi_exception(exc, sql, bound, cursor, None)


def _listened(engine: Engine) -> bool:
    """Whether anything listens to the engine's statements now. (SQLAlchemy's `_has_events`
    says whether anything ever did: it stays set once a listener is removed.)"""
    events = engine.dispatch
    return bool(events.before_execute or events.after_execute or events.before_cursor_execute
                or events.after_cursor_execute)


class _Form:
    """What running one compiled statement on the driver needs, worked out once."""

    def __init__(self, compiled: Any) -> None:
        self.sql: str = compiled.string
        self._encoded: dict[str, bytes] = {}
        self.bind_processors: Mapping[str, Any] = compiled._bind_processors
        self.escaped_names: Mapping[str, str] = compiled.escaped_bind_names or {}
        # each parameter's key, compiled name, name sent, processor, whether it must be
        # given and its value in the statement; None if one's value is computed per call
        self.binds: tuple[tuple[str, str, str, Any, bool, Any], ...] | None = None
        if not any(bind.callable for bind in compiled.bind_names):
            self.binds = tuple((bind.key, name, self.escaped_names.get(name, name),
                                self.bind_processors.get(name), bind.required, bind.value)
                               for bind, name in compiled.bind_names.items())
        self.columns: Sequence[Any] = compiled._result_columns
        self._read: tuple[Any, tuple[tuple[int, Any], ...]] | None = None

    def bind(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters to send, as `construct_params` and the bind processors make them
        for a statement whose own values are those it was compiled with, in one pass."""
        bound = {}
        for key, name, sent, processor, required, fixed in self.binds or ():
            if key in params:
                value = params[key]
            elif name in params:
                value = params[name]
            elif required:
                raise InvalidRequestError(f"A value is required for bind parameter {key!r}",
                                          code="cd3x")
            else:
                value = fixed
            bound[sent] = value if processor is None else processor(value)
        return bound

    def encoded(self, encoding: str) -> bytes:
        """The statement's text in the connection's encoding, encoded once: psycopg encodes
        a text statement at every execution, and then hashes the new bytes to find its
        parsed form (a commit's text is several kilobytes); the same bytes object keeps
        its hash."""
        try:
            return self._encoded[encoding]
        except KeyError:
            encoded = self._encoded[encoding] = self.sql.encode(encoding)
            return encoded

    def rows(self, dialect: Any, description: Sequence[Any], fetched: Sequence[Any]
             ) -> list[Any]:
        """The fetched tuples as rows keyed and processed as SQLAlchemy's would be: by the
        compiled result columns, in order (a select's or a RETURNING's)."""
        if self._read is None:
            if len(self.columns) != len(description):
                raise RuntimeError(f"{len(description)} columns came back where the statement "
                                   f"compiled {len(self.columns)}: {self.sql[:200]}")
            keys = tuple(column.keyname for column in self.columns)
            processing = tuple(
                (index, processor) for index, (column, described) in
                enumerate(zip(self.columns, description, strict=True))
                if (processor := column.type._cached_result_processor(dialect, described[1]))
                is not None)
            self._read = (_row_class(keys), processing)
        row_class, processing = self._read
        if not processing:
            return [row_class._make(values) for values in fetched]
        rows = []
        for values in fetched:
            processed = list(values)
            for index, processor in processing:
                processed[index] = processor(processed[index])
            rows.append(row_class._make(processed))
        return rows


_FORMS: WeakKeyDictionary[Any, _Form | None] = WeakKeyDictionary()


def _form(compiled: Any) -> _Form | None:
    """The compiled statement's form, or None if it must run through SQLAlchemy: parameters
    expanded or rendered at execution, defaults computed in Python, positional parameters,
    or result columns matched by name."""
    try:
        return _FORMS[compiled]
    except KeyError:
        pass
    plain = not (compiled.literal_execute_params or compiled.post_compile_params
                 or compiled.positional or compiled.insert_prefetch or compiled.update_prefetch
                 or compiled.schema_translate_map or compiled._textual_ordered_columns
                 or compiled._ad_hoc_textual or compiled._loose_column_name_matching
                 or (compiled._result_columns and not compiled._ordered_columns))
    form = _FORMS[compiled] = _Form(compiled) if plain else None
    return form


@lru_cache(maxsize=1024)
def _row_class(keys: tuple[str, ...]) -> Any:
    """A row class for these keys: a tuple whose columns are also attributes, and whose
    `_mapping` maps each key to its value, as SQLAlchemy's Row does."""
    base = namedtuple("LoneRow", keys, rename=True)  # type: ignore[misc]
    return type("LoneRow", (base,), {
        "__slots__": (),
        "_mapping": property(lambda row: dict(zip(keys, row, strict=True))),
    })


class LoneResult:
    """The rows of a lone statement, all fetched, with the parts of SQLAlchemy's Result
    the store uses."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def all(self) -> list[Any]:
        return list(self._rows)

    def one_or_none(self) -> Any:
        if len(self._rows) > 1:
            raise MultipleResultsFound("Multiple rows were found when one or none was required")
        return self.first()

    def one(self) -> Any:
        if not self._rows:
            raise NoResultFound("No row was found when one was required")
        return self.one_or_none()

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalars(self) -> LoneResult:
        """The first column of each row, as SQLAlchemy's ScalarResult gives them."""
        return LoneResult([row[0] for row in self._rows], self.rowcount)

    def mappings(self) -> LoneResult:
        return LoneResult([row._mapping for row in self._rows], self.rowcount)
