"""What `@tool` makes of a function: descriptions from docstrings, and refusals at import."""
from __future__ import annotations

import socket
from typing import Annotated, Callable

import pytest
from pydantic import Field

from agentq.tools import ToolDefinitionError, tool


@tool
def google(order_id: str, verbose: bool = False) -> str:
    """Look up an order.

    Reads the order book.

    Args:
        order_id: The order's id, e.g. A-17.
        verbose (bool): Whether to list every line.

    Returns:
        The order as one line.
    """
    return order_id


@tool
def numpy(order_id: str, verbose: bool = False) -> str:
    """Look up an order.

    Parameters
    ----------
    order_id : str
        The order's id, e.g. A-17.
    verbose : bool
        Whether to list every line.
    """
    return order_id


@tool
def rest(order_id: str, verbose: bool = False) -> str:
    """Look up an order.

    :param order_id: The order's id, e.g. A-17.
    :param verbose: Whether to list every line.
    :returns: The order as one line.
    """
    return order_id


@pytest.mark.parametrize("style", [google, numpy, rest], ids=["google", "numpy", "rest"])
def test_each_docstring_style_describes_the_parameters_in_the_schema(style) -> None:
    properties = style.spec.parameters["properties"]
    assert properties["order_id"] == {"type": "string", "description": "The order's id, e.g. A-17."}
    assert properties["verbose"] == {"type": "boolean", "default": False,
                                     "description": "Whether to list every line."}


def test_the_description_keeps_the_prose_and_the_returns_but_not_the_parameter_section() -> None:
    assert google.spec.description == (
        "Look up an order.\n\nReads the order book.\n\nReturns: The order as one line.")
    assert numpy.spec.description == "Look up an order."


def test_a_description_given_in_the_type_hint_wins_over_the_docstring() -> None:
    @tool
    def pick(city: Annotated[str, Field(description="From the hint.")]) -> str:
        """Pick.

        Args:
            city: From the docstring.
        """
        return city

    assert pick.spec.parameters["properties"]["city"]["description"] == "From the hint."


def test_a_parameter_without_a_type_hint_is_refused_naming_it() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'greet': parameter 'name' has no type hint"):
        @tool
        def greet(name, loud: bool = False) -> str:
            return name


def test_a_parameter_type_json_schema_cannot_express_is_refused_naming_it() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'send': parameter 'sock' of type socket has no JSON schema"):
        @tool
        def send(sock: socket.socket) -> None:
            """Send on a socket."""


def test_a_callable_parameter_is_refused_at_decoration_not_at_the_first_call() -> None:
    with pytest.raises(ToolDefinitionError, match=r"parameter 'then' .* has no JSON schema"):
        @tool
        def later(then: Callable[[int], int]) -> None:
            """Call back."""


def test_a_generator_is_refused_because_a_call_has_one_result() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'lines' is a generator function: .*return it"):
        @tool
        def lines(count: int):
            yield from range(count)


def test_an_async_generator_is_refused_too() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'chunks' is an async generator function"):
        @tool
        async def chunks(count: int):
            for n in range(count):
                yield n


def test_a_hint_naming_an_undefined_type_is_refused_with_the_reason() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'odd': its type hints cannot be read: .*Nowhere"):
        @tool
        def odd(value: "Nowhere") -> None:  # noqa: F821
            """Refer to nothing."""


def test_a_definition_error_is_a_value_error_as_the_decorators_option_errors_are() -> None:
    assert issubclass(ToolDefinitionError, ValueError)


def test_editable_is_for_a_tool_that_needs_approval():
    with pytest.raises(ValueError, match="editable is for tools that need approval"):
        tool(editable=True)(lambda amount: None)


def test_deciders_may_be_role_names_or_a_rule():
    from agentq.core.deciders import Deciders

    @tool(needs_approval=True, deciders=["finance"])
    def pay(amount: float) -> str:
        """Pay."""
        return "paid"

    @tool(needs_approval=True, editable=True, deciders=Deciders(users=("carol",), not_self=True))
    def refund(amount: float) -> str:
        """Refund."""
        return "refunded"

    assert pay.deciders == Deciders(roles=("finance",)) and not pay.editable
    assert refund.deciders == Deciders(users=("carol",), not_self=True) and refund.editable


def test_deciders_are_for_calls_a_person_decides():
    with pytest.raises(ValueError, match="deciders are for calls a person decides"):
        tool(deciders=["finance"])(lambda amount: None)
