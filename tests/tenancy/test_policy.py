"""The operator's policy: profiles from a TOML file, what `settings_for` makes of a tenant's settings,
and where each call's endpoint and key come from."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agentq.config import Config
from agentq.core.prices import Prices
from agentq.core.settings import Settings, parse_settings
from agentq.core.token_budgets import PeriodBudgets, TokenBudgets
from agentq.errors import InvalidInput
from agentq.providers.errors import ProviderError
from agentq.tenancy.access import Owner, resolve_endpoint
from agentq.tenancy.policy import Policy, PolicyError, load_policy
from agentq.tenancy.profiles import Profile

POLICY = """
[ceilings]
llm_timeout_s = 120
max_rounds_per_turn = 10

[profiles.gpt]
kind = "openai"
base_url = "https://llm.internal.example/v1"
key_env = "TEAM_OPENAI_KEY"
models = ["gpt-small", "gpt-large"]
default_model = "gpt-small"
extra_body = ["response_format"]
params = { temperature = 0.2, limits = { tool_timeout_s = 30 } }

[profiles.claude]
kind = "anthropic"
models = ["*"]
tenants = ["acme"]
tenant_keys = "required"

[tenants.acme.ceilings]
llm_timeout_s = 600
"""


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return load_policy(str(path))


def refused(policy: Policy, settings: dict, tenant: str = "acme") -> InvalidInput:
    with pytest.raises(InvalidInput) as raised:
        policy.settings_for(parse_settings(settings), tenant)
    return raised.value


# ---- the file ---------------------------------------------------------------------------------


def test_without_a_file_the_profiles_are_scripted_openai_and_anthropic_on_their_own_endpoints():
    policy = load_policy(None)
    assert list(policy.profiles) == ["scripted", "openai", "anthropic"]
    assert policy.profiles["openai"].url == "https://api.openai.com/v1"
    assert policy.profiles["openai"].key_variable == "OPENAI_API_KEY"
    assert policy.profiles["anthropic"].url == "https://api.anthropic.com"
    assert policy.profiles["anthropic"].key_variable == "ANTHROPIC_API_KEY"


def test_demo_mode_off_takes_the_scripted_profile_and_the_demo_tools_away():
    config = Config.from_env({"AGENTQ_DEMO": "off"})
    assert "scripted" not in Policy.from_config(config).profiles and config.tools == ()
    assert Config.from_env({"AGENTQ_DEMO": "off", "AGENTQ_TOOLS": "agentq.tools.demo"}).tools == (
        "agentq.tools.demo",)
    assert Config.from_env({"AGENTQ_TOOLS": "none"}).tools == ()
    with pytest.raises(ValueError, match="AGENTQ_DEMO"):
        Config.from_env({"AGENTQ_DEMO": "of"})


def test_a_file_with_profiles_offers_exactly_those(policy: Policy):
    assert list(policy.profiles) == ["gpt", "claude"]
    assert policy.profiles["gpt"].url == "https://llm.internal.example/v1"
    assert policy.profiles["claude"].url == "https://api.anthropic.com"
    assert policy.ceilings.llm_timeout_s == 120 and policy.ceilings_for("acme").llm_timeout_s == 600
    assert policy.ceilings_for("globex").llm_timeout_s == 120


def test_a_tenants_share_of_the_workers_is_its_own_or_the_default_and_none_caps_nobody(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("[ceilings]\nrunning_steps = 4\n[tenants.big.ceilings]\nrunning_steps = 16\n")
    policy = load_policy(str(path))
    assert (policy.running_steps("big"), policy.running_steps("small")) == (16, 4)
    assert load_policy(None).running_steps("anyone") is None
    path.write_text("[ceilings]\nrunning_steps = 0\n")
    with pytest.raises(PolicyError, match="running_steps"):
        load_policy(str(path))


def test_a_file_with_only_ceilings_keeps_the_built_in_profiles(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("[ceilings]\nscripted_delay_s = 1\n")
    policy = load_policy(str(path))
    assert list(policy.profiles) == ["scripted", "openai", "anthropic"]
    assert policy.ceilings.scripted_delay_s == 1


@pytest.mark.parametrize("text, says", [
    ("[profiles.x]\nkind = \"mystery\"\n", "kind must be one of"),
    ("[profiles.x]\nkind = \"openai\"\nbase_url = \"ftp://h/v1\"\n", "http(s) URL"),
    ("[profiles.x]\nkind = \"openai\"\nbase_url = \"https://u:pw@h/v1\"\n", "credentials"),
    ("[profiles.x]\nkind = \"openai\"\nkey_env = \"sk-live-123\"\n", "NAME of an environment variable"),
    ("[profiles.x]\nkind = \"openai\"\nmodels = [\"a\"]\ndefault_model = \"b\"\n", "default_model"),
    ("[profiles.x]\nkind = \"scripted\"\ntenant_keys = \"optional\"\n", "tenant_keys must be"),
    ("[profiles.x]\nkind = \"openai\"\nparams = { model = \"m\" }\n", "params cannot set model"),
    ("[profiles.x]\nkind = \"openai\"\nparams = { limits = { llm_timeout_s = 5000 } }\n", "above the ceiling"),
    ("[profiles.x]\nkind = \"openai\"\nmistake = 1\n", "mistake"),
    ("[tenants.acme.ceilings]\nno_such_ceiling = 3\n", "no_such_ceiling"),
    ("[ceilings]\nllm_timeout_s = \"long\"\n", "llm_timeout_s"),
    ("[profiles.x\n", "not TOML"),
], ids=["kind", "scheme", "credentials", "key-env", "default-model", "offline-keys", "params-model",
        "params-ceiling", "unknown-field", "tenant-ceiling", "ceiling-type", "toml"])
def test_a_policy_file_that_cannot_be_used_stops_the_process_saying_why(tmp_path: Path, text, says):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as raised:
        load_policy(str(path))
    assert says in str(raised.value) and str(path) in str(raised.value)


def test_a_missing_policy_file_is_an_error_not_the_defaults(tmp_path: Path):
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(str(tmp_path / "absent.toml"))


# ---- the settings made of a tenant's --------------------------------------------------------------


def test_the_profiles_default_model_and_params_fill_what_the_tenant_left_unset(policy: Policy):
    settings = policy.settings_for(parse_settings({"profile": "gpt"}), "acme")
    assert settings.model == "gpt-small" and settings.temperature == 0.2
    assert settings.limits.tool_timeout_s == 30


def test_what_the_tenant_set_wins_over_the_profiles_params(policy: Policy):
    settings = parse_settings({"profile": "gpt", "temperature": 0.9, "limits": {"max_rounds_per_turn": 3}})
    settings = policy.settings_for(settings, "acme")
    assert settings.temperature == 0.9 and settings.limits.max_rounds_per_turn == 3
    assert settings.limits.tool_timeout_s == 30  # nested sections merge


def test_an_unknown_profile_and_one_closed_to_the_tenant_are_refused_alike(policy: Policy):
    unknown = refused(policy, {"profile": "nope"}, "globex")
    closed = refused(policy, {"profile": "claude", "model": "m"}, "globex")
    assert unknown.code == closed.code == "unknown_profile"
    assert "claude" not in str(unknown) and "yours: gpt" in str(closed)


@pytest.mark.parametrize("settings, code, loc", [
    ({"profile": "claude"}, "model_required", ["settings", "model"]),
    ({"profile": "gpt", "model": "gpt-huge"}, "model_not_offered", ["settings", "model"]),
    ({"profile": "gpt", "compaction": {"model": "other"}}, "model_not_offered",
     ["settings", "compaction", "model"]),
    ({"profile": "gpt", "extra_body": {"n": 64}}, "extra_body_refused", ["settings", "extra_body"]),
])
def test_a_model_or_option_the_profile_does_not_offer_is_refused(policy: Policy, settings, code, loc):
    error = refused(policy, settings)
    assert error.code == code and error.details[0]["loc"] == loc


def test_an_extra_body_field_the_profile_takes_is_kept(policy: Policy):
    settings = parse_settings({"profile": "gpt", "extra_body": {"response_format": {"type": "json_object"}}})
    assert policy.settings_for(settings, "acme").extra_body == {"response_format": {"type": "json_object"}}


def test_a_setting_above_its_ceiling_is_refused_naming_the_ceiling(policy: Policy):
    error = refused(policy, {"profile": "gpt", "limits": {"llm_timeout_s": 700, "max_rounds_per_turn": 11}})
    assert error.code == "above_ceiling"
    by_loc = {tuple(d["loc"]): d for d in error.details}
    assert by_loc[("settings", "limits", "llm_timeout_s")]["ceiling"] == "llm_timeout_s"
    assert by_loc[("settings", "limits", "llm_timeout_s")]["limit"] == 600  # acme's own ceiling
    assert "above the ceiling max_rounds_per_turn = 10" in str(error)


def test_a_tenants_own_ceiling_applies_to_that_tenant_only(policy: Policy):
    settings = parse_settings({"profile": "gpt", "limits": {"llm_timeout_s": 500}})
    assert policy.settings_for(settings, "acme").limits.llm_timeout_s == 500
    assert refused(policy, {"profile": "gpt", "limits": {"llm_timeout_s": 500}}, "globex").code == "above_ceiling"


def test_defaults_above_a_ceiling_come_down_to_it_so_a_plain_request_still_works(policy: Policy):
    settings = policy.settings_for(parse_settings({"profile": "gpt"}), "globex")
    assert settings.limits.llm_timeout_s == 120 and settings.limits.max_rounds_per_turn == 10


# ---- where a call goes ---------------------------------------------------------------------------

OPENAI = Profile(name="p", kind="openai", base_url="https://llm.example/v1", key_env="OP_KEY")


def test_the_operators_key_comes_from_the_variable_the_profile_names():
    endpoint = resolve_endpoint(OPENAI, None, {"OP_KEY": "op-secret", "OPENAI_API_KEY": "other"})
    assert (endpoint.base_url, endpoint.api_key) == ("https://llm.example/v1", "op-secret")
    assert "op-secret" not in repr(endpoint)


def test_a_missing_operator_key_fails_naming_the_profile_and_logs_the_variable(caplog):
    caplog.set_level(logging.ERROR)
    with pytest.raises(ProviderError) as raised:
        resolve_endpoint(OPENAI, None, {})
    assert raised.value.code == "missing_api_key" and "OP_KEY" not in raised.value.message
    assert "OP_KEY" in caplog.text


@pytest.mark.parametrize("use, own, expected", [
    ("never", "tenant-secret", "op-secret"),
    ("optional", "tenant-secret", "tenant-secret"),
    ("optional", None, "op-secret"),
    ("required", "tenant-secret", "tenant-secret"),
])
def test_whose_key_a_call_carries_is_the_profiles_choice(use, own, expected):
    profile = OPENAI.model_copy(update={"tenant_keys": use})
    endpoint = resolve_endpoint(profile, Owner("acme", own), {"OP_KEY": "op-secret"})
    assert endpoint.api_key == expected


def test_a_profile_that_requires_the_tenants_key_never_falls_back_to_the_operators():
    profile = OPENAI.model_copy(update={"tenant_keys": "required"})
    with pytest.raises(ProviderError) as raised:
        resolve_endpoint(profile, Owner("acme", None), {"OP_KEY": "op-secret"})
    assert raised.value.code == "missing_api_key" and "PUT /v1/profiles/p/key" in raised.value.message


def test_agentq_policy_prints_each_ceiling_and_each_tenants_share(tmp_path: Path, monkeypatch, capsys):
    import agentq.cli.main as cli

    path = tmp_path / "p.toml"
    path.write_text("[tenants.big.ceilings]\nrunning_steps = 16\n")
    monkeypatch.setenv("AGENTQ_POLICY", str(path))
    assert cli.main(["policy"]) == 0
    printed = capsys.readouterr().out
    assert "llm_timeout_s 900" in printed and "running_steps none" in printed
    assert "tenant big: ceilings running_steps 16" in printed


# ---- the profile of settings that name none ---------------------------------------------------


def test_settings_naming_no_profile_get_the_first_profile_open_to_the_tenant(policy: Policy):
    assert policy.settings_for(parse_settings({}), "acme").profile == "gpt"
    assert policy.settings_for(parse_settings({}), "acme").model == "gpt-small"


def test_with_the_demo_off_settings_naming_no_profile_get_openai_not_scripted():
    policy = Policy.from_config(Config.from_env({"AGENTQ_DEMO": "off"}))
    assert policy.settings_for(parse_settings({"model": "gpt-4o-mini"}), "acme").profile == "openai"
    assert Policy.default().settings_for(parse_settings({}), "acme").profile == "scripted"


def test_the_policy_may_name_the_default_profile(tmp_path: Path):
    path = tmp_path / "policy.toml"
    path.write_text('default_profile = "claude"\n' + POLICY.replace('tenants = ["acme"]\n', ""))
    admitted = load_policy(str(path)).settings_for(parse_settings({"model": "claude-x"}), "zed")
    assert admitted.profile == "claude"


def test_a_default_profile_the_file_does_not_declare_stops_the_process(tmp_path: Path):
    path = tmp_path / "policy.toml"
    path.write_text('default_profile = "gemini"\n' + POLICY)
    with pytest.raises(PolicyError, match="default_profile 'gemini' is none of its profiles"):
        load_policy(str(path))


def test_a_tenant_no_profile_is_open_to_is_told_so(tmp_path: Path):
    path = tmp_path / "policy.toml"
    path.write_text('[profiles.only]\nkind = "scripted"\nmodels = ["scripted"]\ntenants = ["acme"]\n')
    error = refused(load_policy(str(path)), {}, tenant="zed")
    assert (error.code, str(error)) == ("unknown_profile", "no profile is open to you; the "
                                           "operator's policy names the tenants of each")


def test_a_policy_whose_profiles_lack_their_keys_says_none_can_answer():
    policy = Policy.from_config(Config.from_env({"AGENTQ_DEMO": "off"}))
    assert policy.unusable({}) == [
        "no profile can answer: openai needs OPENAI_API_KEY, anthropic needs ANTHROPIC_API_KEY "
        "(set a key, or AGENTQ_DEMO=on for the offline scripted profile)"]
    assert policy.unusable({"ANTHROPIC_API_KEY": "sk-ant-x"}) == []
    assert Policy.default().unusable({}) == []  # the scripted profile answers offline


def test_a_policy_with_no_profile_open_to_every_tenant_says_so(policy: Policy):
    assert policy.unusable({"TEAM_OPENAI_KEY": "k"}) == []
    gpt_for_acme = policy.profiles["gpt"].model_copy(update={"tenants": ("acme",)})
    closed = Policy(profiles={"gpt": gpt_for_acme, "claude": policy.profiles["claude"]})
    assert closed.unusable({"TEAM_OPENAI_KEY": "k"}) == [
        "no profile is open to every tenant: a tenant that no profile's `tenants` names can "
        "start no conversation"]


def test_a_worker_says_at_start_when_no_profile_of_its_policy_can_answer(tmp_path: Path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENTQ_", "OPENAI_", "ANTHROPIC_"))}
    env.update(AGENTQ_DEMO="off", AGENTQ_DATABASE_URL=f"sqlite:///{tmp_path / 'w.db'}")
    started = subprocess.run([sys.executable, "-c", "import agentq.worker.main"], env=env,
                             capture_output=True, text=True, timeout=60, check=True)
    assert "the policy: no profile can answer: openai needs OPENAI_API_KEY" in started.stderr


def test_an_agent_defined_in_code_goes_to_the_tenants_the_policy_names_and_else_to_all(tmp_path: Path):
    path = tmp_path / "policy.toml"
    path.write_text('[agents.concierge]\ntenants = ["acme"]\n')
    policy = load_policy(str(path))
    assert policy.offers_agent("concierge", "acme") and not policy.offers_agent("concierge", "evil")
    assert policy.offers_agent("support", "evil") and Policy.default().offers_agent("concierge", "evil")


def test_agentq_policy_prints_the_agents_the_code_defines_and_whom_each_goes_to(
        tmp_path: Path, monkeypatch, capsys):
    import agentq.cli.main as cli

    path = tmp_path / "p.toml"
    path.write_text('[agents.concierge]\ntenants = ["acme"]\n[agents.ghost]\ntenants = []\n')
    monkeypatch.setenv("AGENTQ_POLICY", str(path))
    monkeypatch.setenv("AGENTQ_TOOLS", "tests.support.tools_for_tests,tests.support.agents_for_tests")
    assert cli.main(["policy"]) == 0
    printed = capsys.readouterr().out
    assert "agent support: defined in code; tenants all" in printed
    assert "agent concierge: defined in code; tenants acme" in printed
    assert "agent ghost: named by the policy, but no module of AGENTQ_TOOLS defines it" in printed


def test_a_tenants_token_budgets_are_its_own_over_every_tenants(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("[budgets]\ntokens_per_day = 1000000\ntokens_per_month = 20000000\n"
                    "[tenants.big.budgets]\ntokens_per_day = 5000000\n"
                    "[tenants.free.budgets]\ntokens_per_hour = 10000\n")
    policy = load_policy(str(path))
    assert policy.budgets_for("big") == TokenBudgets(tokens_per_day=5_000_000,
                                                     tokens_per_month=20_000_000)
    assert policy.budgets_for("free") == TokenBudgets(
        tokens_per_hour=10_000, tokens_per_day=1_000_000, tokens_per_month=20_000_000)
    assert policy.budgets_for("anyone").limits() == {"day": 1_000_000, "month": 20_000_000}
    assert load_policy(None).budgets_for("anyone").limits() == {}


def test_agent_and_conversation_budgets_and_waiting_merge_field_by_field(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("[budgets]\ntokens_per_conversation = 500\n"
                    "[budgets.agents.support]\ntokens_per_day = 100\ntokens_per_hour = 10\n"
                    "[tenants.big.budgets]\non_exceeded = 'wait'\n"
                    "[tenants.big.budgets.agents.support]\ntokens_per_day = 1000\n"
                    "[tenants.big.budgets.agents.sales]\ntokens_per_month = 7\n")
    policy = load_policy(str(path))
    big, anyone = policy.budgets_for("big"), policy.budgets_for("anyone")
    assert big.on_exceeded == "wait" and anyone.on_exceeded == "fail"
    assert big.tokens_per_conversation == anyone.tokens_per_conversation == 500
    assert big.agents["support"] == PeriodBudgets(tokens_per_hour=10, tokens_per_day=1000)
    assert big.agents["sales"].limits() == {"month": 7}
    assert set(anyone.agents) == {"support"} and anyone.agents["support"].limits() == {
        "hour": 10, "day": 100}
    assert big.any() and not load_policy(None).budgets_for("x").any()


@pytest.mark.parametrize("text", ["[budgets]\ntokens_per_day = -1\n",
                                  "[budgets]\ntokens_per_week = 10\n",
                                  "[tenants.x.budgets]\ntokens_per_hour = 'lots'\n",
                                  "[budgets]\non_exceeded = 'queue'\n",
                                  "[budgets.agents.a]\ntokens_per_conversation = 1\n"])
def test_a_budget_that_is_not_a_count_of_tokens_per_hour_day_or_month_stops_the_start(
        tmp_path: Path, text: str):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PolicyError, match="budgets"):
        load_policy(str(path))


def test_prices_come_from_a_profiles_own_table_over_the_policys_per_model(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("[prices.gpt-4o]\ninput = 2.5\noutput = 10\ncached_input = '1.25'\n"
                    "[prices.scripted]\ninput = 0.15\noutput = 0.6\n"
                    "[profiles.openai]\nkind = 'openai'\n"
                    "[profiles.cheap]\nkind = 'openai'\n"
                    "[profiles.cheap.prices.gpt-4o]\ninput = 1\noutput = 4\nreasoning = 8\n")
    policy = load_policy(str(path))
    listed = policy.prices_for(Settings(profile="openai", model="gpt-4o"))
    own = policy.prices_for(Settings(profile="cheap", model="gpt-4o"))
    assert listed == Prices(input=2_500, output=10_000, cached_input=1_250, reasoning=10_000)
    assert own == Prices(input=1_000, output=4_000, cached_input=1_000, reasoning=8_000)
    assert policy.prices_for(Settings(profile="openai", model="gpt-5")) is None
    assert load_policy(None).prices_for(Settings(profile="scripted", model="scripted")) is None


def test_money_budgets_are_read_as_exact_amounts_and_merge_like_token_budgets(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("[budgets]\ncost_per_day = 0.1\ncost_per_conversation = '2.5'\n"
                    "[tenants.big.budgets]\ncost_per_day = 100\n"
                    "[tenants.big.budgets.agents.support]\ncost_per_hour = 0.000000001\n")
    policy = load_policy(str(path))
    big, anyone = policy.budgets_for("big"), policy.budgets_for("anyone")
    assert anyone.cost_limits() == {"day": 100_000_000}
    assert big.cost_limits() == {"day": 100 * 10**9}
    assert big.cost_per_conversation == anyone.cost_per_conversation == 2_500_000_000
    assert big.agents["support"].cost_limits() == {"hour": 1}
    assert big.limits() == {} and big.any()


@pytest.mark.parametrize("text", ["[prices.m]\ninput = 0.0001\noutput = 1\n",
                                  "[prices.m]\ninput = -1\noutput = 1\n",
                                  "[prices.m]\ninput = 1\n",
                                  "[prices.m]\ninput = 1\noutput = 1\nwrite = 2\n",
                                  "[budgets]\ncost_per_day = -2\n",
                                  "[budgets]\ncost_per_day = 'a lot'\n",
                                  "[budgets]\ncost_per_day = 1e-12\n"])
def test_a_price_or_money_budget_that_is_not_an_exact_amount_stops_the_policy(tmp_path, text):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PolicyError):
        load_policy(str(path))


def test_a_soft_threshold_is_a_share_of_every_budget_and_a_tenants_is_its_own(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("[budgets]\ncost_per_day = 1\nask_at_percent = 80\n"
                    "[tenants.big.budgets]\nask_at_percent = 95\n")
    policy = load_policy(str(path))
    assert policy.budgets_for("anyone").ask_at_percent == 80
    assert policy.budgets_for("big").ask_at_percent == 95
    assert load_policy(None).budgets_for("x").ask_at_percent is None
    for bad in ("0", "100", "'most'"):
        path.write_text(f"[budgets]\nask_at_percent = {bad}\n")
        with pytest.raises(PolicyError):
            load_policy(str(path))
