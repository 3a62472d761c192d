"""`agentq policy`: the policy as the processes will read it, and what the tool modules define.

Profiles with the state of their key variables, ceilings, tenants' overrides, the tools and
agents of AGENTQ_TOOLS (loaded as `agentq dev` loads them, agentq.cli.loading), the MCP
servers the policy declares, and the warnings the processes would log at start.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from agentq.agents import CodeAgents
from agentq.cli.loading import load_tools, server_names, tenants_named, tool_names
from agentq.config import Config
from agentq.tenancy.policy import AgentOffer, Policy


def print_policy(config: Config) -> int:
    """Print the policy; 2 if the tool modules do not load (said on stderr)."""
    policy = Policy.from_config(config)
    loaded = load_tools("policy", config.tools)
    if loaded is None:
        return 2
    why = ("AGENTQ_DEMO" if os.environ.get("AGENTQ_DEMO") else
           "the default with the embedded broker" if config.embedded_broker else
           "the default with a named broker, as the Procfile's processes read it")
    print(f"policy: {config.policy_path or 'built-in'} (demo mode {'on' if config.demo else 'off'}: {why})")
    for p in policy.profiles.values():
        where = p.url or "offline"
        key = "" if p.kind_of.offline else (
            f", key in {p.key_variable} ({'set' if os.environ.get(p.key_variable or '') else 'NOT SET'})")
        print(f"  profile {p.name}: {p.kind} at {where}{key}; models {', '.join(p.models)}; "
              f"tenant keys {p.tenant_keys}; tenants {', '.join(p.tenants) if p.tenants else 'all'}")
    print("  ceilings: " + _listed(policy.ceilings.model_dump()))
    for name, tenant in policy.tenants.items():
        print(f"  tenant {name}: ceilings {_listed(tenant.ceilings)}")
    print(f"  tools: {', '.join(tool_names(loaded.registry)) or 'none'}")
    _print_agent_offers(loaded.agents, policy.agents)
    print(f"  mcp servers: {', '.join(server_names(policy.mcp)) or 'none'}")
    default = policy.default_for("*")  # "*": no tenant's name, so the default of any tenant
    named = default.name if default else "none (see the warning below)"
    print(f"  settings that name no profile get: {named}")
    for problem in policy.unusable(os.environ):
        print(f"  warning: {problem}")
    return 0


def _print_agent_offers(defined: CodeAgents, offers: Mapping[str, AgentOffer]) -> None:
    """The agents AGENTQ_TOOLS's modules define, and whom the policy's `offers` give each to."""
    for item in defined:
        offer = offers.get(item.name)
        print(f"  agent {item.name}: defined in code; tenants "
              f"{tenants_named(offer.tenants if offer else None)}")
    for name in sorted(set(offers) - defined.names):
        print(f"  agent {name}: named by the policy, but no module of AGENTQ_TOOLS defines it")


def _listed(values: dict) -> str:
    return ", ".join(f"{k} {_number(v)}" for k, v in values.items())


def _number(value: float | None) -> str:
    if value is None:
        return "none"  # running_steps: no cap
    return str(int(value)) if float(value).is_integer() else str(value)
