"""Images in user messages: validated and size-capped at the API, rendered for each API.

The emulators check images as the APIs document them (Anthropic: base64 of JPEG, PNG,
GIF or WebP up to 5 MB, or a URL source; OpenAI: an https or base64 data URL).
"""
from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from tests.support.api import Api
from tests.support.emulators.kit import Kit, running

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()
URL = "https://images.example.com/oslo.png"
PARTS = [{"type": "text", "text": "What city is this?"}, {"type": "image", "url": URL},
         {"type": "image", "media_type": "image/png", "data": PNG}]


@pytest.fixture(params=["openai", "anthropic", "openai_responses"])
def served(request: pytest.FixtureRequest) -> Iterator[Kit]:
    with running(request.param) as emulator:
        yield Kit(request.param, emulator)


def test_text_and_images_reach_each_api_in_its_own_shape(served: Kit, sqlite_store):
    api = Api(sqlite_store, policy=served.policy(), env=served.env)
    alice = api.key("acme", "alice")
    cid = api.create(alice, profile=served.name, model="emu-model-1")
    assert api.say(cid, PARTS, alice).status_code == 202
    api.run()
    assert not served.emulator.refused, served.emulator.refused
    [user] = [e.content for e in api.store.log.list_events(cid) if e.type == "user_msg"]
    assert user["text"] == "What city is this?" and user["parts"] == PARTS
    if served.name == "openai_responses":
        assert served.emulator.received[-1]["input"][-1]["content"] == [
            {"type": "input_text", "text": "What city is this?"},
            {"type": "input_image", "image_url": URL, "detail": "auto"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]
        return
    content = served.emulator.received[-1]["messages"][-1]["content"]
    if served.name == "openai":
        assert content == [{"type": "text", "text": "What city is this?"},
                           {"type": "image_url", "image_url": {"url": URL}},
                           {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
    else:
        assert [{k: v for k, v in b.items() if k != "cache_control"} for b in content] == [
            {"type": "text", "text": "What city is this?"},
            {"type": "image", "source": {"type": "url", "url": URL}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]
    assert api.types(cid)[-1] == "assistant_msg"


@pytest.mark.parametrize("part, fragment", [
    ({"type": "image", "url": "http://images.example.com/a.png"}, "content"),
    ({"type": "image", "url": "https://10.1.2.3/a.png"}, "private, loopback or link-local"),
    ({"type": "image", "url": "https://169.254.169.254/latest/meta-data"}, "link-local"),
    ({"type": "image", "url": "https://localhost:8080/a.png"}, "private"),
    ({"type": "image", "url": "https://[::1]/a.png"}, "private"),
    ({"type": "image", "url": "https://metadata.internal/a.png"}, "private"),
    ({"type": "image", "url": "https://user:pw@images.example.com/a.png"}, "credentials"),
    ({"type": "image", "url": f"https://{'a' * 64}.example.com/a.png"}, "DNS cannot hold"),
    ({"type": "image", "media_type": "image/png", "data": "not base64!"}, "not valid base64"),
    ({"type": "image", "media_type": "image/jpeg", "data": PNG}, "is not a image/jpeg image"),
    ({"type": "image", "media_type": "image/tiff", "data": PNG}, "content"),
    ({"type": "image", "media_type": {}, "data": PNG}, "media_type must be one of"),
    ({"type": "image", "media_type": ["image/png"], "data": PNG}, "media_type must be one of"),
    ({"type": "image", "url": URL, "detail": "high"}, "content"),
    ({"type": "audio", "url": URL}, "content"),
    ({"type": "text", "text": "   "}, "content"),
], ids=["http", "private", "metadata", "localhost", "ipv6-loopback", "internal-name", "credentials",
        "label-64", "bad-base64", "wrong-type", "tiff", "object-type", "list-type", "unknown-field", "audio", "blank-text"])
def test_a_bad_part_is_a_clear_4xx_and_nothing_is_written(api, alice, part, fragment):
    cid = api.create(alice)
    response = api.say(cid, [{"type": "text", "text": "look"}, part], alice)
    assert response.status_code in (400, 422), response.json
    assert fragment in str(response.json["error"])
    assert api.types(cid) == [] and api.sent == []


def test_an_image_over_the_conversations_cap_is_refused(api, alice):
    cid = api.create(alice, limits={"max_image_bytes": 32})
    response = api.say(cid, [{"type": "image", "media_type": "image/png", "data": PNG}], alice)
    assert response.status_code in (400, 422) and "larger than 32 bytes" in str(response.json)
    assert api.types(cid) == []
    assert api.say(cid, [{"type": "image", "url": URL}], alice).status_code == 202  # a URL is not capped here
