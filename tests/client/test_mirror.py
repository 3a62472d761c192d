"""`AsyncClient`, `AsyncTurn` and `AsyncPage` mirror `Client`, `Turn` and `Page` method for
method: the same names, the same parameters with the same defaults, the same docstrings.
Each method's request and answer are declared once (agentq/client/calls.py); what is
written twice is only its signature."""
from __future__ import annotations

import inspect

import pytest

from agentq.client import AsyncClient, AsyncPage, AsyncTurn, Client, Page, Turn


def public_methods(cls: type) -> dict[str, object]:
    return {name: member for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")}


def parameters(method) -> list[tuple[str, object, object]]:
    """Each parameter's name, kind and default (annotations differ: an iterator is async)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


@pytest.mark.parametrize(("blocking", "asynchronous"),
                         [(Client, AsyncClient), (Turn, AsyncTurn), (Page, AsyncPage)])
def test_the_async_classes_have_the_same_methods_parameters_and_docstrings(blocking, asynchronous):
    sync_methods, async_methods = public_methods(blocking), public_methods(asynchronous)
    assert set(async_methods) == set(sync_methods)
    for name, method in sync_methods.items():
        assert parameters(async_methods[name]) == parameters(method), name
        assert inspect.getdoc(async_methods[name]) == inspect.getdoc(method), name
