"""Build one process's Runtime from its config: store, tool registry, pub/sub and the operator's policy."""
from __future__ import annotations

from agentq.agents import CodeAgents
from agentq.config import Config
from agentq.runtime import Runtime
from agentq.runtime.children import agents_in_store
from agentq.tenancy.own_keys import OwnKeys
from agentq.tenancy.policy import Policy
from agentq.tools import Registry
from agentq.worker.queues import queue_of


def build_runtime(
    config: Config, policy: Policy | None = None, registry: Registry | None = None
) -> Runtime:
    """Wire store, registry, pub/sub and the operator's policy for one process."""
    from agentq.live.pubsub import PubSub
    from agentq.mcp import tool_servers
    from agentq.process.clock import utcnow
    from agentq.store import Store
    from agentq.tenancy.access import ModelAccess

    store = Store.open(config.database_url, event_cache=config.event_cache,
                       event_cache_bytes=config.event_cache_bytes)
    policy = policy or Policy.from_config(config)
    registry = registry or Registry.from_modules(list(config.tools), tool_servers(policy.mcp))
    tool_queues = registry.queues
    own_keys = OwnKeys.from_config(config, store, policy, utcnow)
    # the model functions of the agents the code defines (their tools are checked where
    # they are published: the API, or agentq dev)
    functions = CodeAgents.from_modules(list(config.tools)).functions
    access = ModelAccess(policy, own_keys.owner, functions=functions)
    return Runtime(
        store=store,
        registry=registry,
        webhooks=deliveries_for(config, store, registry),
        pubsub=PubSub(config.redis_url),
        config=config,
        providers=access.provider_for,
        endpoints=access.endpoint_url,
        running_steps=policy.running_steps,
        budgets=policy.budgets_for,
        queue_of=lambda kind, tool: queue_of(kind, tool, tool_queues),
        agents=agents_in_store(store, policy),
        ceilings=policy.ceilings_for,
    )


def deliveries_for(config: Config, store, registry: Registry):
    """The webhook sender of a worker; None where no encryption key seals secrets."""
    from agentq.process.clock import utcnow
    from agentq.webhooks.delivery import Deliveries
    from agentq.webhooks.wiring import webhook_endpoints

    endpoints = webhook_endpoints(config, store, utcnow)
    return None if endpoints is None else Deliveries(store, endpoints, registry, utcnow)
