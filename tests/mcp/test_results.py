"""Images in an MCP result: kept as the tool_result's image parts (core/parts.py's shape),
capped with the result, and shown to the model where its API takes images in tool results."""
from __future__ import annotations

import pytest

from agentq.core.render import render
from agentq.core.responses_wire import check_responses, to_responses
from agentq.core.scope import Scope
from agentq.core.wire import check_anthropic, to_anthropic, to_openai
from agentq.mcp.source import McpTools
from agentq.tools import Registry, ToolContext
from tests.support.api import Api

pytestmark = pytest.mark.slow

PNG_PREFIX = "iVBORw0KGgo"  # base64 of a PNG's first bytes


def _call(policy, kind: str, max_result_chars: int | None = None):
    source = McpTools("crm", policy.mcp["crm"], environ={"CRM_TOKEN": "Bearer t"})
    ctx = ToolContext("call_1", "conv_1", Scope(tenant="acme", user="alice"))
    return Registry([], [source]).call("mcp__crm__chart", {"kind": kind}, ctx, timeout_s=10,
                                       allowed=["mcp:crm"], max_result_chars=max_result_chars)


def test_an_image_of_a_result_becomes_an_image_part_the_output_names(policy):
    outcome = _call(policy, "sales")
    assert outcome.status == "ok"
    (part,) = outcome.parts
    assert part["type"] == "image" and part["media_type"] == "image/png"
    assert part["data"].startswith(PNG_PREFIX)
    text, image = outcome.output["content"]
    assert text == {"type": "text", "text": "the sales chart"}
    assert image["type"] == "image" and image["part"] == 0 and image["bytes"] == 32
    assert "data" not in image  # the bytes are in the part, once


def test_an_image_whose_bytes_are_not_its_type_is_described_and_not_kept(policy):
    outcome = _call(policy, "broken")
    assert outcome.parts == ()
    assert "image not shown" in outcome.output["content"][1]["note"]


def test_a_results_images_are_capped_with_its_text(policy):
    whole = _call(policy, "sales")
    assert _call(policy, "sales", max_result_chars=100_000).parts == whole.parts
    assert _call(policy, "sales", max_result_chars=150).parts == ()


def test_the_model_sees_the_image_where_its_api_takes_images_in_tool_results(store, policy,
                                                                               monkeypatch):
    monkeypatch.setenv("CRM_TOKEN", "Bearer t0ken")
    api = Api(store, policy=policy)
    alice = api.key("acme", "alice")
    script = [{"tool_calls": [{"name": "mcp__crm__chart", "args": {"kind": "sales"}}]},
              {"text": "A chart."}]
    cid = api.create(alice, tools=["mcp:crm/chart"], script=script)
    api.say(cid, "chart", alice)
    api.run()
    result = next(e for e in store.log.list_events(cid) if e.type == "tool_result")
    assert [p["media_type"] for p in result.content["parts"]] == ["image/png"]
    with store.log.reader(cid) as reader:
        request = render(reader.with_history(reader.view()))
    anthropic = [b for m in to_anthropic(request)["messages"] for b in m["content"]
                 if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert [c["type"] for c in anthropic[0]["content"]] == ["text", "image"]
    assert anthropic[0]["content"][1]["source"]["data"].startswith(PNG_PREFIX)
    output = next(i for i in to_responses(request)["input"]
                  if i.get("type") == "function_call_output")["output"]
    assert [c["type"] for c in output] == ["input_text", "input_image"]
    assert check_anthropic(to_anthropic(request)) == []
    assert check_responses(to_responses(request)) == []
    chat = next(m for m in to_openai(request)["messages"] if m["role"] == "tool")
    assert isinstance(chat["content"], str) and '"part": 0' in chat["content"]
