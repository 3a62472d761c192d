"""A tool's argument model and JSON schema, read from its function's type hints and docstring.

A function that cannot be a tool as written (a parameter without a type hint, a type JSON
Schema cannot express) fails here, at decoration, that is at import, with what to change.
The schema the model reads is the argument model's, without pydantic's noise.
"""
from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, create_model
from pydantic.fields import FieldInfo

from agentq.tools.context import ToolContext


class ToolDefinitionError(ValueError):
    """A function that cannot be a tool as written; the message says what to change."""


def param_docs(doc: docstring_parser.Docstring) -> dict[str, str]:
    """Each documented parameter's description, from a Google, NumPy or reST docstring."""
    return {p.arg_name: p.description for p in doc.params if p.description}


def tool_description(doc: docstring_parser.Docstring) -> str:
    """The docstring's text without its parameter section (the schema carries that part)."""
    parts = [doc.short_description, doc.long_description]
    if doc.returns is not None and doc.returns.description:
        parts.append(f"Returns: {doc.returns.description}")
    return "\n\n".join(part for part in parts if part)


def signature_model(
    function: Callable[..., Any], tool_name: str, docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of the function's parameters, and the name of its ToolContext parameter.

    Every parameter needs a type hint: the model reads the schema to know what to send,
    and `Any` would tell it nothing.
    """
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:  # a hint naming what the module does not define
        raise ToolDefinitionError(f"tool {tool_name!r}: its type hints cannot be read: {exc}") from None
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {tool_name!r}: *args and **kwargs have no JSON schema")
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type hint; annotate it "
                f"(e.g. `{param.name}: str`) so the model knows what to send")
        hint = hints[param.name]
        if hint is ToolContext:
            context_param = param.name
            continue
        if param.name.startswith("_"):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} must not start with '_'")
        default = ... if param.default is param.empty else param.default
        described = param.name in docs and not _described(hint)
        field = Field(default, description=docs[param.name]) if described else Field(default)
        fields[param.name] = (hint, field)
        _check_expressible(tool_name, param.name, hint)
    model = create_model(f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return model, context_param


def _described(hint: Any) -> bool:
    """Whether `Annotated[..., Field(description=...)]` already describes the parameter."""
    return typing.get_origin(hint) is typing.Annotated and any(
        isinstance(meta, FieldInfo) and meta.description for meta in hint.__metadata__)


def _check_expressible(tool_name: str, param: str, hint: Any) -> None:
    """ToolDefinitionError naming `param` if JSON Schema cannot say what it takes."""
    try:
        create_model("probe", value=(hint, ...)).model_json_schema()
    except PydanticUserError as exc:
        shown = getattr(hint, "__name__", None) or repr(hint)
        first = str(exc).splitlines()[0]
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameter {param!r} of type {shown} has no JSON schema, so "
            f"the model cannot send it ({first}); use JSON types (str, int, float, bool, "
            "list, dict, Literal, a pydantic model)") from None


_SUBSCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not")


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without pydantic's generated `title`s (noise in every request).

    Careful: only schema keywords are walked, so a property named "title" survives.
    """
    clean = {key: value for key, value in schema.items() if key != "title"}
    for key in _SUBSCHEMA_MAPS:
        if isinstance(clean.get(key), dict):
            clean[key] = {name: clean_schema(sub) for name, sub in clean[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(clean.get(key), list):
            clean[key] = [clean_schema(sub) for sub in clean[key]]
    for key in _SUBSCHEMAS:
        if isinstance(clean.get(key), dict):
            clean[key] = clean_schema(clean[key])
    return clean

