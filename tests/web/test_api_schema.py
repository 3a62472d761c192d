"""/openapi.json: what it declares (test_api_fuzz.py checks the app against it)."""
from __future__ import annotations

import re

import pytest

from tests.support.fuzz import OPERATIONS


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
    assert variants == {"CallResult", "Decision", "Answer", "OutcomeAnswer"}
    assert schemas["PostMessage"]["required"] == ["content"]
    assert schemas["ErrorAnswer"]["required"] == ["error"]


def test_a_schema_a_setting_takes_is_declared_an_object_schema_as_it_is_checked(spec):
    schemas = spec["components"]["schemas"]
    object_schema = {"type": "object", "required": ["type"], "properties": {"type": {"const": "object"}},
                     "additionalProperties": True, "description": "a JSON schema of type object"}
    assert object_schema.items() <= schemas["ResponseFormat"]["properties"]["schema"].items()
    assert schemas["AgentTool"]["properties"]["input_schema"]["anyOf"] == [object_schema, {"type": "null"}]


def test_an_image_parts_data_declares_the_base64_the_check_decodes(spec):
    content = spec["components"]["schemas"]["PostMessage"]["properties"]["content"]
    [parts] = [branch for branch in content["oneOf"] if branch.get("type") == "array"]
    [image] = [part for part in parts["items"]["oneOf"] if "data" in part["properties"]]
    pattern = re.compile(image["properties"]["data"]["pattern"])
    assert pattern.match("iVBORw0KGgo=") and pattern.match("abc=")  # the first: a PNG's signature
    assert not pattern.match("not base64!") and not pattern.match("abcde")


def test_usage_by_declares_the_dimensions_it_takes(spec):
    [by] = [p for p in spec["paths"]["/v1/usage"]["get"]["parameters"] if p["name"] == "by"]
    pattern = re.compile(by["schema"]["pattern"])
    assert pattern.match("agent,root_conversation") and pattern.match("")
    assert not pattern.match("agent,colour") and not pattern.match("agent,")


def test_only_health_readiness_and_the_spec_are_public(spec):
    public = {path for path, ops in spec["paths"].items() for op in ops.values() if not op["security"]}
    assert public == {"/healthz", "/readyz", "/openapi.json"}
    assert spec["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
