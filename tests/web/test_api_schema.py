"""/openapi.json: what it declares, and Schemathesis checking the app against it (no 5xx, on-spec)."""
from __future__ import annotations

import re

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api import APPROVAL, Api

pytestmark = pytest.mark.slow  # Schemathesis: hundreds of generated requests

STREAM = "/v1/conversations/{conversation_id}/stream"
OPERATIONS = {
    ("get", "/healthz"), ("get", "/readyz"), ("get", "/openapi.json"),
    ("post", "/v1/conversations"), ("get", "/v1/conversations"),
    ("get", "/v1/conversations/{conversation_id}"), ("delete", "/v1/conversations/{conversation_id}"),
    ("post", "/v1/conversations/{conversation_id}/messages"),
    ("get", "/v1/conversations/{conversation_id}/events"),
    ("get", "/v1/conversations/{conversation_id}/stream"),
    ("get", "/v1/conversations/{conversation_id}/tool-calls"),
    ("post", "/v1/conversations/{conversation_id}/tool-calls/{call_id}/resolution"),
    ("get", "/v1/conversations/{conversation_id}/tool-calls/{call_id}/context"),
    ("get", "/v1/conversations/{conversation_id}/context"),
    ("post", "/v1/conversations/{conversation_id}/cancel"),
    ("post", "/v1/conversations/{conversation_id}/retry"),
    ("post", "/v1/conversations/{conversation_id}/fork"),
    ("get", "/v1/tool-calls"), ("get", "/v1/usage"),
    ("get", "/v1/profiles"), ("put", "/v1/profiles/{profile}/key"),
    ("delete", "/v1/profiles/{profile}/key"),
    ("post", "/v1/agents"), ("get", "/v1/agents"), ("get", "/v1/agents/{name}"),
    ("post", "/v1/agents/{name}/versions"), ("get", "/v1/agents/{name}/versions"),
    ("get", "/v1/agents/{name}/versions/{version}"),
    ("post", "/v1/webhooks"), ("get", "/v1/webhooks"), ("get", "/v1/webhooks/{webhook_id}"),
    ("patch", "/v1/webhooks/{webhook_id}"), ("delete", "/v1/webhooks/{webhook_id}"),
    ("post", "/v1/webhooks/{webhook_id}/rotate"), ("get", "/v1/webhooks/{webhook_id}/deliveries"),
}


@pytest.fixture
def spec(api):
    return api.client.get("/openapi.json").json


def test_the_spec_is_openapi_3_1_with_every_endpoint_and_nothing_else(spec):
    assert spec["openapi"] == "3.1.0"
    declared = {(method, path) for path, ops in spec["paths"].items() for method in ops}
    assert declared == OPERATIONS


def test_every_operation_declares_the_errors_it_can_answer(spec):
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            statuses = set(op["responses"])
            if op["security"]:
                assert {"401", "422"} <= statuses, (method, path)
            if "{" in path:
                assert "404" in statuses, (method, path)
            if "requestBody" in op:
                assert {"400", "413", "415", "422"} <= statuses, (method, path)
    assert "409" in spec["paths"]["/v1/conversations/{conversation_id}/messages"]["post"]["responses"]


def test_request_bodies_are_the_declared_models_and_refuse_unknown_fields(spec):
    schemas = spec["components"]["schemas"]
    for name in ("PostMessage", "CallResult", "Decision", "Answer", "CreateConversation",
                 "CreateAgent", "NewAgentVersion"):
        assert schemas[name]["additionalProperties"] is False
    variants = {ref["$ref"].rsplit("/", 1)[-1] for ref in schemas["Resolution"]["oneOf"]}
    assert variants == {"CallResult", "Decision", "Answer"}
    assert schemas["PostMessage"]["required"] == ["content"]
    assert schemas["ErrorAnswer"]["required"] == ["error"]


def test_a_schema_a_setting_takes_is_declared_an_object_schema_as_it_is_checked(spec):
    schemas = spec["components"]["schemas"]
    object_schema = {"type": "object", "required": ["type"], "properties": {"type": {"const": "object"}},
                     "description": "a JSON schema of type object"}
    assert object_schema.items() <= schemas["ResponseFormat"]["properties"]["schema"].items()
    assert schemas["AgentTool"]["properties"]["input_schema"]["anyOf"] == [object_schema, {"type": "null"}]


def test_usage_by_declares_the_dimensions_it_takes(spec):
    [by] = [p for p in spec["paths"]["/v1/usage"]["get"]["parameters"] if p["name"] == "by"]
    pattern = re.compile(by["schema"]["pattern"])
    assert pattern.match("agent,root_conversation") and pattern.match("")
    assert not pattern.match("agent,colour") and not pattern.match("agent,")


def test_only_health_readiness_and_the_spec_are_public(spec):
    public = {path for path, ops in spec["paths"].items() for op in ops.values() if not op["security"]}
    assert public == {"/healthz", "/readyz", "/openapi.json"}
    assert spec["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}


@pytest.fixture
def fuzzed(store):
    """The app on a real store as Schemathesis loads it, a valid key, and a conversation that
    waits for a person (so a stream of it ends with ?until_idle=1 and it has a pending call)."""
    target = Api(store)
    headers = target.key("fuzz", "fuzzer")
    cid = target.create(headers, script=APPROVAL)
    target.say(cid, "pay Bob", headers)
    target.run()
    [call] = store.list_tool_calls(cid, status="pending")
    assert target.client.post("/v1/agents", json={"name": "fuzzy"}, headers=headers).status_code == 201
    hook = target.client.post("/v1/webhooks", headers=headers, json={
        "url": "https://hooks.example.com/agentq", "event_types": ["call.waiting"]}).json
    # NUL is valid JSON but no PostgreSQL text can hold it: the API answers 422 (tested in
    # test_api_errors), which a JSON schema cannot declare, so it is not generated here.
    config = SchemathesisConfig.from_dict({"generation": {"allow-x00": False}})
    schema = schemathesis.openapi.from_wsgi("/openapi.json", target.app, config=config)
    return schema, headers, {"conversation_id": cid, "call_id": call.id, "profile": "openai",
                            "name": "fuzzy", "version": "1", "webhook_id": hook["id"]}


FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def _aim(case, real: dict[str, str], use_real: bool) -> None:
    """Half the cases name the real conversation (and call) instead of random ids."""
    if use_real and case.path_parameters:
        case.path_parameters = {name: real[name] for name in case.path_parameters}


# Each operation is driven with hypothesis directly: Schemathesis' pytest plugin
# (`from_fixture`) reads a private pytest attribute that pytest 9 no longer has.
@pytest.mark.parametrize("method, path", sorted(OPERATIONS - {("get", STREAM)}))
def test_no_request_gets_a_5xx_or_an_answer_the_spec_does_not_declare(fuzzed, method, path):
    schema, headers, real = fuzzed
    # Settings carry rules no JSON schema states (tools must be registered, base_url must be
    # http(s), api_key_ref names a variable): valid-looking settings may rightly get 422.
    # Likewise image parts: an https URL on a private host, or base64 that is not the image
    # its media type says, is refused though the schema cannot say so.
    # An agent's settings are the same settings, and a name may be taken already; a webhook
    # URL must not name a private or loopback host, which no pattern can say. A usage range
    # must end after it starts and span a bounded time, and `by` name known dimensions once.
    rules_beyond_schema = {("get", "/v1/usage"),("post", "/v1/conversations"),
                           ("post", "/v1/conversations/{conversation_id}/messages"),
                           ("post", "/v1/agents"), ("post", "/v1/agents/{name}/versions"),
                           ("post", "/v1/webhooks"), ("patch", "/v1/webhooks/{webhook_id}")}
    excluded = [positive_data_acceptance] if (method, path) in rules_beyond_schema else []

    @given(case=schema[path][method].as_strategy(), use_real=st.booleans())
    @FUZZ
    def check(case, use_real):
        _aim(case, real, use_real)
        case.call_and_validate(headers=headers, excluded_checks=excluded)

    check()


def test_the_stream_answers_on_spec_for_any_query_and_header(fuzzed):
    schema, headers, real = fuzzed

    @given(case=schema[STREAM]["get"].as_strategy(), use_real=st.booleans())
    @FUZZ
    def check(case, use_real):
        _aim(case, real, use_real)
        case.query = {**(case.query or {}), "until_idle": "1"}  # a stream left open never ends
        case.call_and_validate(headers=headers)

    check()
