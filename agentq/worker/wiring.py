"""Build one process's Runtime from its config: store, tool registry, pub/sub and the operator's policy."""
from __future__ import annotations

from agentq.config import Config
from agentq.runtime import Runtime
from agentq.tenancy.own_keys import OwnKeys
from agentq.tenancy.policy import Policy
from agentq.tools import Registry


def build_runtime(
    config: Config, policy: Policy | None = None, registry: Registry | None = None
) -> Runtime:
    """Wire store, registry, pub/sub and the operator's policy for one process."""
    from agentq.live.pubsub import PubSub
    from agentq.mcp import tool_servers
    from agentq.process.clock import utcnow
    from agentq.store import Store
    from agentq.tenancy.access import ModelAccess

    store = Store.open(config.database_url, event_cache=config.event_cache)
    policy = policy or Policy.from_config(config)
    own_keys = OwnKeys.from_config(config, store, policy, utcnow)
    access = ModelAccess(policy, own_keys.owner)
    return Runtime(
        store=store,
        registry=registry or Registry.from_modules(list(config.tools), tool_servers(policy.mcp)),
        pubsub=PubSub(config.redis_url),
        config=config,
        providers=access.provider_for,
        endpoints=access.endpoint_url,
        running_steps=policy.running_steps,
    )
