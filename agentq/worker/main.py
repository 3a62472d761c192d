"""The composition root of a deployed worker: `celery -A agentq.worker:app` builds `app` here.

It reads the config from the environment, loads the operator's policy and tools, and connects
the worker's signal handlers, all at import: Celery imports this module in every worker, beat
and Flower process. Nothing else imports it (agentq.worker's `app` attribute loads it lazily).
"""
from __future__ import annotations

import functools
import logging
import os

from agentq.config import Config
from agentq.mcp import tool_servers
from agentq.tenancy.own_keys import keybox_for
from agentq.tenancy.policy import Policy
from agentq.tools import Registry
from agentq.worker import signals
from agentq.worker.factory import create_celery
from agentq.worker.tasks import enqueue
from agentq.worker.wiring import build_runtime, deliveries_for, firing_for

_config = Config.from_env()
# A policy the processes cannot use stops them at start, not at their first task.
_policy = Policy.from_config(_config)
keybox_for(_config, _policy)
for _problem in _policy.unusable(os.environ):  # said at start, not at a tenant's first turn
    logging.getLogger("agentq.tenancy.policy").warning("the policy: %s", _problem)
# The tools, for the queues they name: a worker without -Q takes those too, Flower shows them.
_registry = Registry.from_modules(list(_config.tools), tool_servers(_policy.mcp))
_runtime = functools.cache(lambda: build_runtime(_config, _policy, _registry))
_deliveries = functools.cache(lambda: deliveries_for(_runtime()))
_firing = functools.cache(lambda: firing_for(_runtime(), _policy))
app = create_celery(_config, _runtime, tool_queues=_registry.queues, deliveries=_deliveries,
                    firing=_firing)
signals.connect_process(_config.log_format)
signals.connect_sweeper(app, _runtime, lambda due: enqueue(app, due, tool_queues=_registry.queues))
signals.connect_slots(app, _runtime)
signals.connect_heap_freeze()  # last: the runtime the handlers above built is frozen too
