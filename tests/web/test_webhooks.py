"""/v1/webhooks through the API: a tenant's endpoints, their secrets shown once, hostile URLs
refused, another tenant's endpoints invisible, deliveries listed, /metrics counting them."""
from __future__ import annotations

import pytest

URL = "https://hooks.example.com/agentq"
TYPES = ["call.waiting", "turn.completed"]


def create(api, headers, url=URL, types=TYPES):
    return api.client.post("/v1/webhooks", headers=headers, json={"url": url, "event_types": types})


def test_a_new_endpoint_shows_its_secret_once_and_never_again(api, alice, store):
    made = create(api, alice)
    assert made.status_code == 201
    secret = made.json["secret"]
    assert secret.startswith("whsec_") and made.json["enabled"] is True
    listed = api.client.get("/v1/webhooks", headers=alice).json["webhooks"]
    one = api.client.get(f"/v1/webhooks/{made.json['id']}", headers=alice).json
    assert [w["id"] for w in listed] == [made.json["id"]]
    assert secret not in str(listed) + str(one)
    stored = store.webhooks.load_endpoint(made.json["id"])
    assert secret not in stored.sealed_secret and secret[6:] not in stored.sealed_secret


@pytest.mark.parametrize("url, code", [
    ("http://hooks.example.com/agentq", "url_refused"),  # https only: the operator allows no http
    ("https://127.0.0.1/agentq", "url_refused"), ("https://localhost/agentq", "url_refused"),
    ("https://10.1.2.3/agentq", "url_refused"), ("https://[::1]/agentq", "url_refused"),
    ("https://169.254.169.254/latest/meta-data", "url_refused"),
    ("https://[::ffff:192.168.0.1]/agentq", "url_refused"),
    (f"https://{'a' * 64}.example.com/agentq", "url_refused"),
    ("https://hooks.example.com:99999/agentq", "url_refused"),
    # what the URL's schema states: no user or password, no fragment
    ("https://user:pw@hooks.example.com/agentq", "validation_error"),
    ("https://hooks.example.com/agentq#top", "validation_error"),
])
def test_a_url_webhooks_may_not_reach_is_refused_and_nothing_is_stored(api, alice, url, code, store):
    answer = create(api, alice, url=url)
    assert answer.status_code == 422, answer.json
    assert answer.json["error"]["code"] == code
    assert store.webhooks.list_endpoints("acme") == []


HTTP, LOOPBACK = "AGENTQ_WEBHOOK_ALLOW_HTTP", "AGENTQ_WEBHOOK_ALLOW_LOOPBACK"


@pytest.mark.parametrize("url, settings", [
    ("http://hooks.example.com/agentq", [HTTP]),
    ("https://127.0.0.1/agentq", [LOOPBACK]), ("https://localhost:9000/agentq", [LOOPBACK]),
    ("https://[::ffff:127.0.0.1]/agentq", [LOOPBACK]),
    ("http://127.0.0.1:9000/hooks", [HTTP, LOOPBACK]),  # both at once, not one answer each
])
def test_a_refused_url_names_every_setting_that_would_allow_it(api, alice, url, settings):
    answer = create(api, alice, url=url)
    assert answer.status_code == 422
    assert answer.json["error"]["details"] == {"settings": settings}
    assert all(f"{name}=on" in answer.json["error"]["message"] for name in settings)


@pytest.mark.parametrize("url", ["https://10.1.2.3/agentq", "https://169.254.169.254/latest",
                                 "http://192.168.0.1/hooks"])
def test_a_url_no_setting_allows_names_none(api, alice, url):
    answer = create(api, alice, url=url)
    assert answer.status_code == 422
    assert "no setting" in answer.json["error"]["message"]
    assert "AGENTQ_" not in answer.json["error"]["message"] and answer.json["error"]["details"] is None


def test_without_encryption_keys_webhooks_are_503_naming_the_setting(api, alice):
    api.services.webhooks = None  # a deployment that does not set AGENTQ_ENCRYPTION_KEYS
    answer = create(api, alice)
    assert answer.status_code == 503 and answer.json["error"]["code"] == "webhooks_unavailable"
    assert "AGENTQ_ENCRYPTION_KEYS" in answer.json["error"]["message"]
    assert answer.json["error"]["details"] == {"settings": ["AGENTQ_ENCRYPTION_KEYS"]}


def test_unknown_event_types_and_fields_are_refused(api, alice):
    assert create(api, alice, types=["call.exploded"]).status_code == 422
    assert create(api, alice, types=[]).status_code == 422
    extra = api.client.post("/v1/webhooks", headers=alice,
                            json={"url": URL, "event_types": TYPES, "secret": "mine"})
    assert extra.status_code == 422


def test_a_tenant_has_at_most_its_cap_of_endpoints(api, alice):
    for n in range(10):
        assert create(api, alice, url=f"{URL}/{n}").status_code == 201
    refused = create(api, alice, url=f"{URL}/11")
    assert refused.status_code == 409 and refused.json["error"]["code"] == "too_many_endpoints"


def test_another_tenants_endpoint_is_not_found_for_every_verb(api, alice, mallory):
    hook = create(api, alice).json["id"]
    for method, path, body in [
        ("get", f"/v1/webhooks/{hook}", None), ("patch", f"/v1/webhooks/{hook}", {"enabled": False}),
        ("post", f"/v1/webhooks/{hook}/rotate", {}), ("delete", f"/v1/webhooks/{hook}", None),
        ("get", f"/v1/webhooks/{hook}/deliveries", None),
    ]:
        answer = getattr(api.client, method)(path, headers=mallory, json=body)
        assert answer.status_code == 404, (method, path)
    assert api.client.get("/v1/webhooks", headers=mallory).json == {"webhooks": []}
    assert api.client.get(f"/v1/webhooks/{hook}", headers=alice).json["enabled"] is True


def test_disabling_rotating_and_deleting_an_endpoint(api, alice):
    made = create(api, alice).json
    off = api.client.patch(f"/v1/webhooks/{made['id']}", headers=alice, json={"enabled": False})
    assert off.json["enabled"] is False and off.json["disabled_reason"] == "disabled by the tenant"
    rotated = api.client.post(f"/v1/webhooks/{made['id']}/rotate", headers=alice,
                              json={"grace_s": 600}).json
    assert rotated["secret"] != made["secret"] and rotated["previous_secret_until"] is not None
    assert api.client.delete(f"/v1/webhooks/{made['id']}", headers=alice).status_code == 204
    assert api.client.get(f"/v1/webhooks/{made['id']}", headers=alice).status_code == 404


def test_a_turns_deliveries_are_listed_and_counted_in_metrics(api, alice):
    from tests.support.api import APPROVAL

    hook = create(api, alice, types=["call.waiting"]).json["id"]
    cid = api.create(alice, script=APPROVAL)
    api.say(cid, "pay Bob", alice)
    api.run()
    (delivery,) = api.client.get(f"/v1/webhooks/{hook}/deliveries", headers=alice).json["deliveries"]
    assert delivery["event_type"] == "call.waiting" and delivery["conversation_id"] == cid
    assert delivery["status"] == "pending" and delivery["webhook_id"].startswith("msg_")
    scraped = api.client.get("/metrics").get_data(as_text=True)
    assert 'agentq_webhook_deliveries{status="pending"} 1.0' in scraped


def test_a_pending_call_has_the_context_a_person_decides_on_and_the_list_shows_titles(api, alice):
    script = [{"text": "The lookup says 129.90 EUR.",
               "tool_calls": [{"name": "lookup", "args": {"key": "A-17"}}]},
              {"text": "Refunding.",
               "tool_calls": [{"name": "issue_refund", "args": {"order": "A-17", "amount": 1299.0}}]},
              {"text": "Done."}]
    cid = api.create(alice, script=script)
    api.say(cid, "Refund order A-17 please", alice)
    api.run()
    (call,) = api.client.get(f"/v1/conversations/{cid}", headers=alice).json["pending"]
    assert call["needs_approval"] is True
    found = api.client.get(f"/v1/conversations/{cid}/tool-calls/{call['tool_call_id']}/context",
                           headers=alice).json
    assert found["conversation"] == {"id": cid, "title": "Refund order A-17 please"}
    assert found["call"]["description"].startswith("Refund an order")
    assert found["context"]["user_message"] == "Refund order A-17 please"
    assert found["context"]["acting_user"] == {"tenant": "acme", "user": "alice"}
    assert found["context"]["assistant_text"] == "Refunding."
    (earlier,) = found["context"]["earlier_calls"]
    assert earlier["name"] == "lookup" and earlier["status"] == "ok"
    (item,) = api.client.get("/v1/conversations", headers=alice).json["conversations"]
    assert item["title"] == "Refund order A-17 please" and item["acting_user"] == "alice"
    scraped = api.client.get("/metrics").get_data(as_text=True)
    assert 'agentq_pending_calls{executor="approval"} 1.0' in scraped
