"""store/conversations.py: parsed settings are reused per conversation, in a cache bounded by
count and by size."""
from __future__ import annotations

import json

import sqlalchemy as sa

from agentq.core.settings import Settings
from agentq.core.weight import weight
from agentq.store import Store, conversations
from agentq.store.conversations import _ParsedSettings
from agentq.store.schema import conversations as conversation_rows
from tests.support.clock import T0


def script(n: int, words: int) -> dict:
    return {"script": [{"text": f"answer {n} " + "word " * words}]}


def test_settings_stored_unchanged_are_parsed_once_and_changed_ones_again():
    cache = _ParsedSettings(size=10, max_bytes=2**20)
    first = cache.parse("c1", script(1, 3))
    assert cache.parse("c1", script(1, 3)) is first
    assert cache.parse("c1", script(2, 3)) is not first and len(cache) == 1


def test_the_least_recently_loaded_conversation_leaves_first_past_the_count():
    cache = _ParsedSettings(size=2, max_bytes=2**20)
    a = cache.parse("a", script(1, 3))
    cache.parse("b", script(2, 3))
    assert cache.parse("a", script(1, 3)) is a  # "a" is now the most recent
    cache.parse("c", script(3, 3))
    assert len(cache) == 2 and cache.parse("a", script(1, 3)) is a  # "b" left, not "a"


def test_heavy_settings_fill_the_cache_by_size_however_few_and_one_too_heavy_is_not_kept():
    heavy = script(1, 2000)
    cache = _ParsedSettings(size=1000, max_bytes=5 * 2 * weight(heavy))
    for n in range(8):
        cache.parse(f"c{n}", script(1, 2000))
    assert len(cache) == 5 and cache.bytes <= 5 * 2 * weight(heavy)
    small = _ParsedSettings(size=1000, max_bytes=weight(heavy))
    assert small.parse("c1", heavy).script[0].text.startswith("answer 1")
    assert len(small) == 0 and small.bytes == 0


def test_settings_read_as_text_are_decoded_only_when_the_text_changes(monkeypatch):
    decoded = []

    class CountingJson:
        @staticmethod
        def loads(text):
            decoded.append(text)
            return json.loads(text)

    monkeypatch.setattr(conversations, "json", CountingJson)
    cache = _ParsedSettings(size=10, max_bytes=2**20)
    text = json.dumps(script(1, 3))
    first = cache.parse("c1", text)
    assert cache.parse("c1", text) is first and len(decoded) == 1
    assert cache.parse("c1", json.dumps(script(2, 3))).script[0].text.startswith("answer 2")
    assert len(decoded) == 2


def test_a_conversations_settings_are_read_back_as_the_text_of_what_was_stored(db_url):
    """The row's settings come back undecoded, on either database; the conversation read
    from it has the settings it was created with."""
    store = Store.open(db_url)
    settings = Settings.model_validate(script(1, 3))
    try:
        cid = store.conversations.create(tenant="acme", settings=settings, now=T0).id
        with store.engine.connect() as conn:
            text = conn.execute(sa.select(conversation_rows.c.settings)
                                .where(conversation_rows.c.id == cid)).scalar_one()
        assert isinstance(text, str)
        assert json.loads(text) == settings.model_dump(mode="json")
        assert store.conversations.load(cid).settings == settings
    finally:
        store.dispose()
