"""The runtime's two seams: the tenant rules each implementation gives, and the notices a
round's announcer publishes (the shapes the streams read, unchanged by the seam)."""
from __future__ import annotations

from pathlib import Path

from agentq.core.ceilings import Ceilings
from agentq.core.settings import Settings, parse_settings
from agentq.core.token_budgets import TokenBudgets
from agentq.live.announcer import LiveAnnouncer
from agentq.runtime.model_call import RetriesOnly
from agentq.runtime.seams import NoPolicy, TenantRules
from agentq.tenancy.access import ModelAccess
from agentq.tenancy.policy import load_policy
from agentq.tenancy.rules import PolicyRules
from agentq.worker.queues import MODEL, TIMERS, TOOLS
from agentq.worker.wiring import WorkerRules
from tests.support.announce import Published

POLICY = """
[ceilings]
max_agent_depth = 2

[profiles.gpt]
kind = "openai"
base_url = "https://llm.internal.example/v1/"
key_env = "TEAM_OPENAI_KEY"
models = ["gpt-small"]

[tenants.acme.ceilings]
max_agent_depth = 1
running_steps = 3

[tenants.acme.budgets]
tokens_per_day = 1000

[agents.refunder]
tenants = ["acme"]
"""


def policy_rules(tmp_path: Path, tool_queues: dict[str, str] | None = None) -> WorkerRules:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    policy = load_policy(str(path))
    return WorkerRules(policy, ModelAccess(policy, env={}), tool_queues or {})


def test_without_a_policy_no_step_is_capped_held_or_kept_from_an_agent():
    rules: TenantRules = NoPolicy()
    settings = parse_settings({"profile": "scripted"})
    assert rules.endpoint_url(settings) is None  # no circuit breaker
    assert rules.running_steps("acme") is None and rules.queue_of("tool", "slow") is None
    assert rules.budgets_for("acme") == TokenBudgets() and not rules.budgets_for("acme").any()
    assert rules.ceilings_for("acme") == Ceilings()
    assert rules.offers_agent("refunder", "acme")
    assert rules.settings_for(settings, "acme", from_code=True) is settings


def test_a_policys_rules_are_the_policys_answers_for_each_tenant(tmp_path):
    rules = policy_rules(tmp_path)
    policy = rules.policy
    for tenant in ("acme", "globex"):
        assert rules.running_steps(tenant) == policy.running_steps(tenant)
        assert rules.budgets_for(tenant) == policy.budgets_for(tenant)
        assert rules.ceilings_for(tenant) == policy.ceilings_for(tenant)
        assert rules.offers_agent("refunder", tenant) == policy.offers_agent("refunder", tenant)
    assert rules.running_steps("acme") == 3 and rules.running_steps("globex") is None
    assert rules.ceilings_for("acme").max_agent_depth == 1
    assert rules.budgets_for("acme").any() and not rules.offers_agent("refunder", "globex")


def test_a_policys_rules_key_the_breaker_by_the_profiles_endpoint(tmp_path):
    rules = policy_rules(tmp_path)
    assert rules.endpoint_url(Settings(profile="gpt")) == "https://llm.internal.example/v1"
    assert rules.endpoint_url(Settings(profile="gone")) is None


def test_the_rules_of_the_policy_alone_know_no_queue_and_a_workers_know_its_tools(tmp_path):
    rules = policy_rules(tmp_path, {"slow_search": "gpu"})
    assert PolicyRules(rules.policy, rules.access).queue_of("tool", "slow_search") is None
    assert rules.queue_of("tool", "slow_search") == "gpu"
    assert rules.queue_of("tool", "echo") == TOOLS
    assert rules.queue_of("model", None) == MODEL and rules.queue_of("expire", None) == TIMERS


def test_a_rounds_notices_keep_the_shapes_the_streams_read():
    published = Published()
    announced = LiveAnnouncer(published).round("c1", turn_id="t1", round_id="r1")
    announced.delta(2, 0, "Hel")
    announced.retry(1, "overloaded", 1.5, transient=True)
    announced.retry(None, "circuit open", 30.0, transient=True, until="2026-01-01T00:00:00Z",
                    circuit="open")
    LiveAnnouncer(published).new_events("c1", 7)
    assert [(kind, list(data.items())) for kind, data in published.notices] == [
        ("delta", [("round_id", "r1"), ("turn_id", "t1"), ("index", 0), ("attempt", 2),
                   ("text", "Hel")]),
        ("retry", [("round_id", "r1"), ("turn_id", "t1"), ("attempt", 1),
                   ("error", "overloaded"), ("next_delay_s", 1.5), ("transient", True)]),
        ("retry", [("round_id", "r1"), ("turn_id", "t1"), ("attempt", None),
                   ("error", "circuit open"), ("next_delay_s", 30.0),
                   ("until", "2026-01-01T00:00:00Z"), ("transient", True), ("circuit", "open")]),
        ("events", [("last_seq", 7)]),
    ]


def test_a_summarys_call_announces_its_retries_and_none_of_its_deltas():
    published = Published()
    announced = RetriesOnly(LiveAnnouncer(published)).round("c1", turn_id="t1", round_id=None)
    announced.delta(1, 0, "the summary so far")
    announced.retry(1, "overloaded", 0.5, transient=True)
    assert [kind for kind, _ in published.notices] == ["retry"]
    assert published.notices[0][1]["round_id"] is None
