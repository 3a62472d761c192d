"""The compiled-statement cache: a statement run again is found by its key object, unhashed."""
from __future__ import annotations

import gc
import weakref

from sqlalchemy import select
from sqlalchemy.engine.interfaces import CacheStats

from agentq.store import Store
from agentq.store.compiled_cache import CompiledByStatement
from agentq.store.schema import conversations


class StatementKey:
    """Stands in for SQLAlchemy's nested tuple: equal by value, counting its hashes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.hashed = 0

    def __hash__(self) -> int:
        self.hashed += 1
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatementKey) and other.text == self.text


DIALECT = object()


def lookup(key: object, columns: tuple[str, ...] = ("id",)) -> tuple[object, ...]:
    """SQLAlchemy's lookup key, a new tuple on each execution."""
    return (DIALECT, key, columns, False, False)


def test_a_statement_run_again_is_found_without_hashing_its_key():
    cache = CompiledByStatement()
    key = StatementKey("SELECT …")
    cache[lookup(key)] = "compiled"
    hashed = key.hashed
    assert cache.get(lookup(key)) == "compiled"
    assert cache.get(lookup(key)) == "compiled"
    assert key.hashed == hashed


def test_an_equal_statement_built_anew_finds_the_same_compiled_form_by_value():
    cache = CompiledByStatement()
    cache[lookup(StatementKey("SELECT …"))] = "compiled"
    again = StatementKey("SELECT …")
    assert cache.get(lookup(again)) == "compiled"
    assert again.hashed == 1  # by value once, then by its identity
    assert cache.get(lookup(again)) == "compiled"
    assert again.hashed == 1


def test_other_column_names_are_another_compiled_form():
    cache = CompiledByStatement()
    key = StatementKey("INSERT …")
    cache[lookup(key, ("a",))] = "with a"
    assert cache.get(lookup(key, ("a", "b"))) is None
    assert cache.get(lookup(key, ("a",))) == "with a"


def test_a_key_of_another_shape_is_looked_up_by_value_only():
    cache = CompiledByStatement()
    cache[("some", "other", "key")] = "compiled"
    assert cache.get(("some", "other", "key")) == "compiled"
    assert cache.get(("missing",), "default") == "default"


def test_statements_built_per_call_keep_a_bounded_number_of_keys_alive():
    cache = CompiledByStatement(size=3)
    alive = []
    for index in range(20):
        key = StatementKey(f"SELECT {index}")
        alive.append(weakref.ref(key))
        cache[lookup(key)] = index
        cache.get(lookup(key))
        del key
    gc.collect()
    assert sum(ref() is not None for ref in alive) <= 6  # the cache's 3, and its LRU's slack


def test_a_store_finds_a_statement_it_ran_before_in_its_compiled_cache(db_url):
    store = Store.open(db_url)
    statement = select(conversations.c.id).where(conversations.c.id == "none")
    try:
        assert isinstance(store.engine.get_execution_options()["compiled_cache"],
                          CompiledByStatement)
        with store.engine.connect() as conn:
            first = conn.execute(statement)
            second = conn.execute(statement)
            assert first.context.cache_hit == CacheStats.CACHE_MISS
            assert second.context.cache_hit == CacheStats.CACHE_HIT
            assert second.all() == []
    finally:
        store.dispose()
