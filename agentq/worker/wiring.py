"""Build one process's Runtime from its config: store, tool registry, pub/sub and the operator's
rules, and the webhook deliveries its tasks send."""
from __future__ import annotations

from collections.abc import Mapping

from agentq.agents import CodeAgents
from agentq.config import Config
from agentq.core.handoffs import CodeInputFilter
from agentq.runtime import Runtime
from agentq.tenancy.access import ModelAccess
from agentq.tenancy.own_keys import OwnKeys
from agentq.tenancy.policy import Policy
from agentq.tenancy.rules import PolicyRules
from agentq.tools import Registry
from agentq.worker.queues import queue_of


class WorkerRules(PolicyRules):
    """The policy's rules, and the queue each step's task goes to on these workers."""

    def __init__(self, policy: Policy, access: ModelAccess, tool_queues: Mapping[str, str],
                 input_filters: Mapping[str, CodeInputFilter] | None = None) -> None:
        super().__init__(policy, access, input_filters)
        self.tool_queues = tool_queues

    def queue_of(self, kind: str, tool: str | None) -> str | None:
        return queue_of(kind, tool, self.tool_queues)


def build_runtime(
    config: Config, policy: Policy | None = None, registry: Registry | None = None
) -> Runtime:
    """Wire store, registry, pub/sub and the operator's rules for one process."""
    from agentq.live.pubsub import PubSub
    from agentq.mcp import tool_servers
    from agentq.process.clock import utcnow
    from agentq.store import Store

    store = Store.open(config.database_url, event_cache=config.event_cache,
                       event_cache_bytes=config.event_cache_bytes)
    policy = policy or Policy.from_config(config)
    registry = registry or Registry.from_modules(list(config.tools), tool_servers(policy.mcp))
    own_keys = OwnKeys.from_config(config, store, policy, utcnow)
    # the model functions and handoff input filters of the agents the code defines (their
    # tools are checked where they are published: the API, or agentq dev)
    code = CodeAgents.from_modules(list(config.tools))
    access = ModelAccess(policy, own_keys.owner, functions=code.functions)
    return Runtime(
        store=store,
        registry=registry,
        pubsub=PubSub(config.redis_url),
        config=config,
        rules=WorkerRules(policy, access, registry.queues, code.input_filters),
    )


def firing_for(runtime: Runtime, policy: Policy):
    """What fires the schedules on a worker: the commands a run takes, on the runtime's store."""
    from agentq.agents.catalog import Catalog
    from agentq.commands import Commands
    from agentq.commands.firing import Firing

    agents = CodeAgents.from_modules(list(runtime.config.tools), runtime.registry)
    commands = Commands(runtime.store, runtime.registry, close_round=runtime.pubsub.close_round,
                        policy=policy, catalog=Catalog(runtime.store, policy.offers_agent, agents))
    return Firing(commands, grace_s=runtime.config.schedule_grace_s)


def deliveries_for(runtime: Runtime):
    """The webhook sender of a worker's runtime; None where no encryption key seals secrets."""
    from agentq.process.clock import utcnow
    from agentq.webhooks.delivery import Deliveries
    from agentq.webhooks.wiring import webhook_endpoints

    endpoints = webhook_endpoints(runtime.config, runtime.store, utcnow)
    return None if endpoints is None else Deliveries(runtime.store, endpoints, runtime.registry,
                                                     utcnow)
