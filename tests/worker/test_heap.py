"""A worker's startup heap is set aside from the garbage collector once tasks can run."""
from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from celery import signals

from agentq.worker.signals import connect_heap_freeze


@pytest.fixture
def heap_freeze() -> Iterator[None]:
    gc.unfreeze()
    connect_heap_freeze()
    yield
    signals.worker_ready.disconnect(dispatch_uid="agentq.freeze_heap")
    signals.worker_process_init.disconnect(dispatch_uid="agentq.freeze_heap_in_child")
    gc.unfreeze()


@pytest.mark.parametrize("ready", [signals.worker_ready, signals.worker_process_init],
                         ids=["worker ready", "prefork child started"])
def test_what_a_process_holds_when_tasks_can_run_is_frozen(heap_freeze, ready):
    held = object.__new__(type("Held", (), {}))  # a tracked object made before
    assert gc.get_freeze_count() == 0
    ready.send(sender=None)
    assert gc.get_freeze_count() > 0
    assert not any(o is held for o in gc.get_objects())  # out of every generation's walk
