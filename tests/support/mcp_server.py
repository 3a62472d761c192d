"""A real MCP server for the tests, built with the SDK's MCPServer (FastMCP).

`python tests/support/mcp_server.py http PORT` serves Streamable HTTP on 127.0.0.1:PORT/mcp;
`python tests/support/mcp_server.py stdio` speaks over stdin/stdout. Its tools say which
call id they saw in `_meta`, so a test can check it arrived.
"""
from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ImageContent,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel

server = MCPServer("crm", log_level="WARNING")


class Customer(BaseModel):
    customer: str
    tier: str
    seen_call_id: str | None


def _call_id(ctx: Context) -> str | None:
    meta = ctx.request_context.meta or {}
    return meta.get("agentq/tool_call_id")


@server.tool()
def lookup(customer: str, ctx: Context) -> Customer:
    """Look a customer up by name: their tier."""
    return Customer(customer=customer, tier="gold" if customer == "Ada" else "basic",
                    seen_call_id=_call_id(ctx))


@server.tool()
def authorization(ctx: Context) -> str:
    """The Authorization header this call came with."""
    return dict(ctx.headers or {}).get("authorization", "none")


@server.tool()
async def slow(key: str, seconds: float, ctx: Context) -> str:
    """Wait, then answer; each call appends `key call_id` to the file MCP_CALL_LOG names first."""
    with open(os.environ["MCP_CALL_LOG"], "a") as log:
        log.write(f"{key} {_call_id(ctx)}\n")
    await anyio.sleep(seconds)
    return f"{key} done"


@server.tool()
def greet(name: str) -> str:
    """Say hello."""
    return f"Hello, {name}!"


@server.tool()
def refund(order: str, amount: int) -> str:
    """Refund an order; refunds above 100 are refused."""
    if amount > 100:
        raise ToolError(f"refund of {amount} for {order} is above the limit of 100")
    return f"refunded {amount} for {order}"


# the first bytes of a PNG, enough for a model API (and agentq) to know it for one
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(24)).decode()


@server.tool()
def chart(kind: str) -> list[TextContent | ImageContent]:
    """A chart as an image, after a line of text; `kind` "broken" sends bytes that are no PNG."""
    data = base64.b64encode(b"not a png").decode() if kind == "broken" else PNG
    return [TextContent(type="text", text=f"the {kind} chart"),
            ImageContent(type="image", data=data, mime_type="image/png")]


CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}, "note": {"type": "string", "maxLength": 40}},
    "required": ["confirm"],
}


@server.tool()
def confirm_refund(order: str, amount: int, ctx: Context) -> str | InputRequiredResult:
    """Refund an order once a person confirms it (MCP elicitation, 2026-07-28 style).

    Appends `order call_id round` to MCP_CALL_LOG (if set) on each call, round 1 being
    the one that asks and round 2 the one that carries the answer.
    """
    answer = (ctx.input_responses or {}).get("confirm")
    if os.environ.get("MCP_CALL_LOG"):
        with open(os.environ["MCP_CALL_LOG"], "a") as log:
            log.write(f"{order} {_call_id(ctx)} {1 if answer is None else 2}\n")
    if answer is None:
        ask = ElicitRequestFormParams(message=f"Refund {amount} for {order}?",
                                      requested_schema=CONFIRM_SCHEMA)
        return InputRequiredResult(input_requests={"confirm": ElicitRequest(params=ask)},
                                   request_state=f"refund:{order}:{amount}")
    if ctx.request_state != f"refund:{order}:{amount}":
        raise ToolError(f"request state {ctx.request_state!r} is not this call's")
    if not isinstance(answer, ElicitResult) or answer.action != "accept":
        return f"not refunded: the person chose {getattr(answer, 'action', '?')}"
    content = answer.content or {}
    if not content.get("confirm"):
        return f"not refunded: {content.get('note') or 'not confirmed'}"
    return f"refunded {amount} for {order} ({content.get('note') or 'no note'})"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
