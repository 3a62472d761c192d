"""Bad requests get a clear 4xx in one shape, never a 500 and never a half-written log."""
from __future__ import annotations

import json

import pytest

from tests.support.api import Api

POSTS = ["/v1/conversations", "/v1/conversations/{cid}/messages",
         "/v1/conversations/{cid}/tool-calls/call_x/resolution"]


def _error(response, status, code):
    assert response.status_code == status, response.json
    assert set(response.json) == {"error"}
    assert set(response.json["error"]) == {"code", "message", "details"}
    assert response.json["error"]["code"] == code
    return response.json["error"]


@pytest.fixture
def cid(api, alice):
    return api.create(alice)


@pytest.mark.parametrize("path", POSTS)
def test_malformed_json_is_400(api, alice, cid, path):
    response = api.client.post(path.format(cid=cid), data='{"content": "hi"', headers=alice,
                               content_type="application/json")
    _error(response, 400, "malformed_json")


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_json_is_415(api, alice, cid, path, content_type):
    response = api.client.post(path.format(cid=cid), data='{"content": "hi"}', headers=alice,
                               content_type=content_type)
    _error(response, 415, "unsupported_media_type")


def test_a_json_media_type_with_a_suffix_is_json(api, alice, cid):
    response = api.client.post(f"/v1/conversations/{cid}/messages", data='{"content": "hi"}',
                               headers=alice, content_type="application/vnd.agentq+json; charset=utf-8")
    assert response.status_code == 202


@pytest.mark.parametrize("raw", [b'"\xff\xfe"', b"NaN", b"[Infinity]", b"[" * 5000 + b"]" * 5000])
def test_bodies_json_would_refuse_elsewhere_are_400(api, alice, cid, raw):
    response = api.client.post(f"/v1/conversations/{cid}/messages", data=raw, headers=alice,
                               content_type="application/json")
    _error(response, 400, "malformed_json")


@pytest.mark.parametrize("content", ["nul \u0000 inside", "lone \ud800 surrogate"])
def test_text_postgres_cannot_store_is_422_on_every_backend(api, alice, cid, content):
    raw = json.dumps({"content": content})
    response = api.client.post(f"/v1/conversations/{cid}/messages", data=raw, headers=alice,
                               content_type="application/json")
    error = _error(response, 422, "validation_error")
    assert error["details"][0]["type"] == "unstorable"
    assert api.types(cid) == []


def test_a_validation_errors_message_says_what_is_wrong_and_where(api, alice, cid):
    blank = _error(api.say(cid, "", alice), 422, "validation_error")
    assert blank["message"] == ("the request is not valid: content: must be non-blank text or "
                                "a list of parts")
    many = {"settings": {f"no_such_{n}": 1 for n in range(5)}}
    error = _error(api.client.post("/v1/conversations", json=many, headers=alice), 422,
                   "validation_error")
    assert error["message"].startswith("the request is not valid: settings.no_such_0: Extra inputs")
    assert error["message"].endswith("(and 2 more in details)") and len(error["details"]) == 5


def test_a_number_too_large_for_a_float_is_422(api, alice, cid):
    response = api.client.post(f"/v1/conversations/{cid}/tool-calls/call_x/resolution",
                               data='{"status": "resolved", "result": 1e400}', headers=alice,
                               content_type="application/json")
    _error(response, 422, "validation_error")


def test_a_result_nested_too_deep_is_422(api, alice, cid):
    deep = '{"status": "resolved", "result": ' + "[" * 150 + "]" * 150 + "}"
    response = api.client.post(f"/v1/conversations/{cid}/tool-calls/call_x/resolution",
                               data=deep, headers=alice, content_type="application/json")
    _error(response, 422, "validation_error")


def test_a_body_over_the_limit_is_413_and_nothing_is_written(store):
    small = Api(store, MAX_CONTENT_LENGTH=1024)
    headers = small.key("acme")
    cid = small.create(headers)
    response = small.say(cid, "x" * 2000, headers)
    _error(response, 413, "payload_too_large")
    assert small.types(cid) == []
    assert small.say(cid, "x" * 900, headers).status_code == 202


def test_the_default_body_limit_is_one_mebibyte(api, alice, cid):
    response = api.say(cid, "x" * (1024 * 1024), alice)
    _error(response, 413, "payload_too_large")


def test_a_413_says_the_limit_the_body_passed(store):
    small = Api(store, MAX_CONTENT_LENGTH=1024)
    headers = small.key("acme")
    error = _error(small.say(small.create(headers), "x" * 2000, headers), 413, "payload_too_large")
    assert error["message"] == "the body is larger than this API's limit of 1,024 bytes"
    assert error["details"] == {"max_bytes": 1024}


def test_an_http_image_url_is_invalid_content_naming_the_rule_like_other_bad_parts(api, alice, cid):
    response = api.say(cid, [{"type": "text", "text": "look"},
                             {"type": "image", "url": "http://images.example.com/a.png"}], alice)
    error = _error(response, 422, "invalid_content")
    assert error["message"] == "content[1].url must be an https URL"
    private = api.say(cid, [{"type": "image", "url": "https://10.1.2.3/a.png"}], alice)
    assert _error(private, 422, "invalid_content")["message"].startswith("content[0].url")
    assert api.types(cid) == []


@pytest.mark.parametrize("settings, field", [
    ({"base_url": "http://169.254.169.254/"}, "base_url"),
    ({"api_key_ref": "AGENTQ_DATABASE_URL"}, "api_key_ref"),
    ({"api_key": "sk-0123456789abcdefghijkl"}, "api_key"),
    ({"extra_body": {"headers": {"Authorization": "Bearer x"}}}, "extra_body.headers.Authorization"),
    ({"extra_body": {"user": "sk-0123456789abcdefghijkl"}}, "extra_body.user"),
], ids=["base_url", "api_key_ref", "api_key", "a-header", "key-shaped-value"])
def test_settings_with_an_endpoint_or_a_key_are_forbidden_setting_naming_the_field(
        api, alice, settings, field):
    response = api.client.post("/v1/conversations", json={"settings": {"model": "m", **settings}},
                               headers=alice)
    error = _error(response, 422, "forbidden_setting")
    assert field in error["message"] and "profile" in error["message"]
    assert "sk-0123456789" not in json.dumps(response.json) and "169.254" not in json.dumps(response.json)


def test_an_unknown_route_is_404_in_the_error_shape(api, alice):
    _error(api.get("/v1/nothing-here", alice), 404, "not_found")
    _error(api.get("/nothing-here", alice), 404, "not_found")


def test_a_method_a_route_does_not_have_is_405_with_allow(api, alice, cid):
    response = api.client.put(f"/v1/conversations/{cid}", headers=alice)
    _error(response, 405, "method_not_allowed")
    assert set(response.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "DELETE"}


def test_an_unexpected_failure_is_a_500_in_the_same_shape(api, alice, cid, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(api.store.log, "list_events", broken)
    error = _error(api.get(f"/v1/conversations/{cid}/events", alice), 500, "internal_error")
    assert "disk" not in error["message"]
