"""The operator's policy: model profiles, ceilings and per-tenant overrides (inv. 9).

Read once per process from the TOML file that AGENTQ_POLICY names (tomllib: no extra
dependency); without one, the built-in profiles and default ceilings. `settings_for` is where a
tenant's settings meet it: the profile must be open to the tenant, the model on offer,
every costly number under its ceiling; the profile's parameters fill what the tenant left
unset. `[budgets]` and `[tenants.NAME.budgets]` set token and money budgets per period, per
agent (`.agents.NAME`) and per conversation, and whether a turn past one fails or waits.
`[prices.MODEL]` (and a profile's own `prices.MODEL`) says what a model's tokens cost.
`[mcp.NAME]` declares a tool server (agentq.mcp) and the tenants that may name it in their
settings' tools. `[agents.NAME] tenants = [...]` offers an agent defined in code to those tenants
only (one the file does not name goes to every tenant). `[deciders.TOOL]` and
`[tenants.NAME.deciders.TOOL]` say who may decide a tool's calls (agentq.tenancy.deciders).
A file that does not parse stops the process at start, with where and why. The `function`
profile is no profile of the file: it names a model function of the operator's code
(agentq.providers.function), which only settings from a code agent may name.
"""
from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from agentq.config import Config
from agentq.core.ceilings import Ceilings, fit_to_ceilings
from agentq.core.deciders import Deciders
from agentq.core.prices import Prices, parse_money
from agentq.core.settings import FUNCTION_PROFILE, Settings
from agentq.core.token_budgets import PeriodBudgets, TokenBudgets
from agentq.errors import InvalidInput
from agentq.tenancy.deciders import DecidersRule, rules_of
from agentq.tenancy.prices import ModelPrice
from agentq.tenancy.profiles import Profile, builtin_profiles
from agentq.tools.definition import QUEUE_NAME
from agentq.tools.remote import SERVER_NAME, is_ref, parse_ref


class PolicyError(ValueError):
    """The operator's policy file cannot be used: it says where and why."""


def _nanos(value: object) -> object:
    """An amount of the policy (decimal text, or a TOML number as written) as nanos."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)):
        return value  # the int check below says what is wrong
    return parse_money(repr(value) if isinstance(value, float) else value)


Money = Annotated[int, BeforeValidator(_nanos)]


class AgentBudgets(BaseModel):
    """`[budgets.agents.NAME]` (or under `[tenants.X.budgets]`): tokens, input + output, the
    tenant's conversations of the agent NAME may spend together per UTC hour, day or month."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens_per_hour: int | None = Field(default=None, ge=0)
    tokens_per_day: int | None = Field(default=None, ge=0)
    tokens_per_month: int | None = Field(default=None, ge=0)
    # money, in the currency of [prices]: decimal text or a number, kept as nanos
    cost_per_hour: Money | None = None
    cost_per_day: Money | None = None
    cost_per_month: Money | None = None

    def under(self, own: AgentBudgets | None) -> PeriodBudgets:
        return PeriodBudgets(**_overlaid(self, own))


class Budgets(AgentBudgets):
    """`[budgets]` (every tenant's) or `[tenants.NAME.budgets]` (one's, over those): tokens,
    input + output, a tenant may spend per UTC hour, day or month, one conversation over its
    life, and each agent (`agents.NAME`); unset is no budget. `on_exceeded`: a turn past a
    budget fails (`fail`) or waits, holding no worker, until the period resets (`wait`);
    `ask_at_percent`: past that share of a budget, a turn asks a person before going on."""

    tokens_per_conversation: int | None = Field(default=None, ge=0)
    on_exceeded: Literal["fail", "wait"] = "fail"
    agents: dict[str, AgentBudgets] = Field(default_factory=dict)
    cost_per_conversation: Money | None = None
    # a soft threshold: past this share of any budget, a turn asks a person to go on
    ask_at_percent: int | None = Field(default=None, ge=1, le=99)

    def under(self, own: AgentBudgets | None) -> TokenBudgets:
        """These budgets with what `own` sets over them (an agent's, field by field)."""
        mine = own if isinstance(own, Budgets) else None
        merged = _overlaid(self, mine, exclude={"agents"})
        names = {*self.agents, *(mine.agents if mine else {})}
        agents = {name: self.agents.get(name, AgentBudgets()).under(
            mine.agents.get(name) if mine else None) for name in names}
        return TokenBudgets(**merged, agents=agents)


def _overlaid(base: BaseModel, own: BaseModel | None, exclude: set[str] | None = None
              ) -> dict[str, Any]:
    """`base`'s fields with those `own` sets over them."""
    merged = base.model_dump(exclude=exclude)
    if own is not None:
        merged.update(own.model_dump(include=own.model_fields_set - (exclude or set())))
    return merged


class ScheduleLimits(BaseModel):
    """`[schedules]` (every tenant's) or `[tenants.NAME.schedules]` (one's, over those): how
    many schedules a tenant may keep, how often one may fire at most, how far back a
    catch-up may reach (agentq.commands.schedules), and how often a run that fails is tried
    (agentq.commands.firing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_per_tenant: int = Field(default=100, ge=0)
    min_interval_s: float = Field(default=60.0, gt=0.0)
    max_catch_up_slots: int = Field(default=100, ge=0)
    max_catch_up_age_s: float = Field(default=7 * 86_400.0, ge=0.0)
    # a run that fails for a reason that may pass (not a refusal) is tried this often, the
    # first retry after retry_after_s and each next one twice as late, then given up
    run_attempts: int = Field(default=5, ge=1)
    retry_after_s: float = Field(default=30.0, gt=0.0)

    def under(self, own: ScheduleLimits | None) -> ScheduleLimits:
        return ScheduleLimits(**_overlaid(self, own))


class TenantPolicy(BaseModel):
    """`[tenants.NAME]`: what differs for one tenant."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ceilings: dict[str, Any] = Field(default_factory=dict)  # overrides of [ceilings]
    budgets: Budgets | None = None  # over [budgets]
    deciders: dict[str, DecidersRule] = Field(default_factory=dict)  # over [deciders], by tool
    schedules: ScheduleLimits | None = None  # over [schedules]


class AgentOffer(BaseModel):
    """`[agents.NAME]`: which tenants an agent defined in code is offered to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenants: tuple[str, ...] | None = None  # None: every tenant

    def open_to(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants


class McpServer(BaseModel):
    """`[mcp.NAME]`: an MCP tool server the operator runs or trusts, and who may use it.

    `url` is a Streamable HTTP endpoint; `command` starts a stdio server per call (local
    development). A header value `"env:NAME"` is read from the worker's environment when
    a call is made, so secrets stay out of the file. Tenants name the server, never its URL.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(default=None, pattern=r"^https?://")
    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)  # a stdio server's environment, "env:" too
    tenants: tuple[str, ...] | None = None  # None: every tenant
    timeout_s: float = Field(default=30.0, gt=0.0, le=3600.0)  # one call, retries included
    list_ttl_s: float = Field(default=300.0, ge=0.0, le=86_400.0)  # how long a listing is kept
    queue: str | None = None  # the Celery queue of its calls (None: agentq.tools)
    # how long a person has to answer a question the server asks mid-call (elicitation)
    answer_within_s: float = Field(default=86_400.0, gt=0.0, le=30 * 86_400.0)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError("an MCP server has either a url (Streamable HTTP) or a command (stdio)")
        if self.queue is not None and not QUEUE_NAME.fullmatch(self.queue):
            raise ValueError("queue names a Celery queue (letters, digits, '.', '_', ':', '-')")
        return self

    def open_to(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants


class _PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ceilings: Ceilings = Field(default_factory=Ceilings)
    budgets: Budgets = Field(default_factory=Budgets)
    # The profile of a conversation that names none (None: the first one open to the tenant).
    default_profile: str | None = None
    profiles: dict[str, dict[str, Any]] | None = None
    tenants: dict[str, TenantPolicy] = Field(default_factory=dict)
    agents: dict[str, AgentOffer] = Field(default_factory=dict)
    mcp: dict[str, McpServer] = Field(default_factory=dict)
    deciders: dict[str, DecidersRule] = Field(default_factory=dict)  # by tool name, or "*"
    prices: dict[str, ModelPrice] = Field(default_factory=dict)  # per model name
    schedules: ScheduleLimits = Field(default_factory=ScheduleLimits)

    @model_validator(mode="after")
    def _server_names(self) -> _PolicyFile:
        bad = [name for name in self.mcp if not SERVER_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"MCP server names are letters, digits, '_' and '-' (at most 32): {bad}")
        return self


@dataclass(frozen=True)
class Policy:
    """What tenants may use and ask for; shared, read-only, by the API and the workers."""

    profiles: Mapping[str, Profile]
    ceilings: Ceilings = field(default_factory=Ceilings)
    tenants: Mapping[str, TenantPolicy] = field(default_factory=dict)
    default_profile: str | None = None
    # Code-defined agents the policy names, and to whom; one it does not name goes to all.
    agents: Mapping[str, AgentOffer] = field(default_factory=dict)
    mcp: Mapping[str, McpServer] = field(default_factory=dict)  # tool servers, by name
    budgets: Budgets = field(default_factory=Budgets)  # every tenant's, under its own
    deciders: Mapping[str, DecidersRule] = field(default_factory=dict)  # who decides, by tool
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)  # under a profile's own
    schedules: ScheduleLimits = field(default_factory=ScheduleLimits)  # every tenant's, under its own

    @classmethod
    def default(cls, *, demo: bool = True) -> Policy:
        return cls(profiles=builtin_profiles(demo=demo))

    @classmethod
    def from_config(cls, config: Config) -> Policy:
        """The policy of AGENTQ_POLICY (or the built-in one), in AGENTQ_DEMO's mode."""
        return load_policy(config.policy_path, demo=config.demo)

    def profile(self, name: str, tenant: str) -> Profile | None:
        """The profile `name` if it exists and is open to `tenant` (else None: unknown to it)."""
        found = self.profiles.get(name)
        return found if found is not None and found.open_to(tenant) else None

    def profiles_for(self, tenant: str) -> list[Profile]:
        return [p for p in self.profiles.values() if p.open_to(tenant)]

    def default_for(self, tenant: str) -> Profile | None:
        """The profile of `tenant`'s conversations that name none: the policy's
        `default_profile` if open to it, else the settings' own default (`scripted`) if
        offered, else the first profile open to it."""
        for name in (self.default_profile, Settings.model_fields["profile"].default):
            named = self.profile(name, tenant) if name else None
            if named is not None:
                return named
        offered = self.profiles_for(tenant)
        return offered[0] if offered else None

    def unusable(self, env: Mapping[str, str]) -> list[str]:
        """Why some or every tenant has no profile it can use; empty when all is well.

        A profile can answer when it calls no API, when the operator's key variable is set,
        or when tenants bring their own key. Said at start, not at a tenant's first turn.
        """
        problems = []
        answering = [p for p in self.profiles.values() if p.kind_of.offline
                     or p.tenant_keys != "never" or env.get(p.key_variable or "")]
        if not answering:
            missing = ", ".join(f"{p.name} needs {p.key_variable}" for p in self.profiles.values())
            problems.append(f"no profile can answer: {missing or 'the policy declares none'} "
                            "(set a key, or AGENTQ_DEMO=on for the offline scripted profile)")
        if not any(p.open_to_all for p in self.profiles.values()):
            problems.append("no profile is open to every tenant: a tenant that no profile's "
                            "`tenants` names can start no conversation")
        return problems

    def offers_agent(self, name: str, tenant: str) -> bool:
        """Whether the agent `name` defined in code is offered to `tenant`."""
        offer = self.agents.get(name)
        return offer is None or offer.open_to(tenant)

    def ceilings_for(self, tenant: str) -> Ceilings:
        own = self.tenants.get(tenant)
        return self.ceilings.overridden(own.ceilings) if own and own.ceilings else self.ceilings

    def budgets_for(self, tenant: str) -> TokenBudgets:
        """The token budgets of `tenant`: its own over every tenant's."""
        own = self.tenants.get(tenant)
        return self.budgets.under(own.budgets if own else None)

    def deciders_for(self, tenant: str) -> tuple[dict[str, Deciders], dict[str, Deciders]]:
        """Who may decide calls, by tool name (or `*`): `tenant`'s own rules, and every
        tenant's (agentq.core.deciders.rule_for weighs them with the tool's)."""
        own = self.tenants.get(tenant)
        return rules_of(own.deciders if own else {}), rules_of(self.deciders)

    def prices_for(self, settings: Settings) -> Prices | None:
        """The prices of a call with these settings: its profile's own for its model (the
        profile's default if it names none), else the policy's; None: the model is not
        priced (its calls cost 0)."""
        profile = self.profiles.get(settings.profile)
        model = settings.model or (profile.chosen_model if profile is not None else None)
        if model is None:
            return None
        own = profile.prices.get(model) if profile is not None else None
        found = own or self.prices.get(model)
        return None if found is None else found.prices()

    def schedules_for(self, tenant: str) -> ScheduleLimits:
        """The schedule limits of `tenant`: its own over every tenant's."""
        own = self.tenants.get(tenant)
        return self.schedules.under(own.schedules if own else None)

    def running_steps(self, tenant: str) -> int | None:
        """How many of `tenant`'s steps may run at once on all workers (None: no cap)."""
        return self.ceilings_for(tenant).running_steps

    def settings_for(self, settings: Settings, tenant: str, *, from_code: bool = False
                     ) -> Settings:
        """The settings a conversation of `tenant` is created with, or InvalidInput (422).

        Settings that name no profile get the tenant's default one. Only settings
        `from_code` (an agent of the operator's code, as it defines them) may name a model
        function (inv. 9): a tenant's name no code to run.
        """
        if settings.profile == FUNCTION_PROFILE:
            if not from_code:
                raise _refused("unknown_profile", f"profile {FUNCTION_PROFILE!r} runs the "
                               "operator's model functions: only the operator's own agents "
                               "use it", ("profile",))
            self._check_tool_servers(settings, tenant)
            return self._within_ceilings(settings, tenant)
        if "profile" not in settings.model_fields_set:
            default = self.default_for(tenant)
            if default is None:
                raise _refused("unknown_profile", "no profile is open to you; the operator's "
                               "policy names the tenants of each", ("profile",))
            settings = settings.model_copy(update={"profile": default.name})
        profile = self.profile(settings.profile, tenant)
        if profile is None:
            names = ", ".join(p.name for p in self.profiles_for(tenant)) or "none"
            raise _refused("unknown_profile", f"no profile {settings.profile!r}; yours: {names}",
                           ("profile",))
        settings = _with_params(settings, profile)
        model = settings.model or profile.chosen_model
        if model is None:
            raise _refused("model_required", f"profile {profile.name!r} needs a model: name one",
                           ("model",))
        for loc, name in ((("model",), model), (("compaction", "model"), settings.compaction.model)):
            if name is not None and not profile.offers(name):
                offered = ", ".join(profile.models)
                raise _refused("model_not_offered",
                               f"profile {profile.name!r} offers {offered}, not {name!r}", loc)
        refused_fields = [k for k in settings.extra_body or {} if not profile.takes_extra(k)]
        if refused_fields:
            raise _refused("extra_body_refused", f"profile {profile.name!r} does not take "
                           f"extra_body fields {', '.join(sorted(refused_fields))}", ("extra_body",))
        self._check_tool_servers(settings, tenant)
        fitted = self._within_ceilings(settings, tenant)
        return fitted.model_copy(update={"model": model, "profile": profile.name})

    def _within_ceilings(self, settings: Settings, tenant: str) -> Settings:
        """The settings fitted to `tenant`'s ceilings, or InvalidInput naming each excess."""
        fitted, excesses = fit_to_ceilings(settings, self.ceilings_for(tenant))
        if excesses:
            details = [{"loc": ["settings", *e.loc], "msg": e.message, "type": "above_ceiling",
                        "ceiling": e.ceiling, "limit": e.limit} for e in excesses]
            raise InvalidInput("; ".join(e.message for e in excesses), code="above_ceiling",
                               details=details)
        return fitted

    def _check_tool_servers(self, settings: Settings, tenant: str) -> None:
        """InvalidInput unless every `mcp:` entry of the tools names a server open to `tenant`
        (one that is not reads as unknown: its existence is not the tenant's to learn)."""
        for index, name in enumerate(settings.tools or ()):
            if not is_ref(name):
                continue
            parsed = parse_ref(name)
            server = self.mcp.get(parsed[0]) if parsed else None
            if server is None or not server.open_to(tenant):
                yours = ", ".join(f"mcp:{n}" for n, s in self.mcp.items() if s.open_to(tenant))
                raise _refused("unknown_tool_server",
                               f"no tool server {name!r}; yours: {yours or 'none'}",
                               ("tools", str(index)))


def _refused(code: str, message: str, loc: tuple[str, ...]) -> InvalidInput:
    details = [{"loc": ["settings", *loc], "msg": message, "type": code}]
    return InvalidInput(message, code=code, details=details)


def _with_params(settings: Settings, profile: Profile) -> Settings:
    """The profile's parameters under what the tenant set (nested sections merge)."""
    if not profile.params:
        return settings
    merged = _merge(profile.params, settings.model_dump(exclude_unset=True))
    return Settings.model_validate(merged)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        below = out.get(key)
        out[key] = _merge(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return out


def load_policy(path: str | None, *, demo: bool = True) -> Policy:
    """The policy in the TOML file at `path`; the built-in one when `path` is None or empty.

    A file that declares `[profiles.…]` offers exactly those; one without keeps the
    built-in profiles and only sets ceilings or tenants.
    """
    if not path:
        return Policy.default(demo=demo)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        parsed = _PolicyFile.model_validate(data)
        profiles = (
            builtin_profiles(demo=demo) if parsed.profiles is None
            else {name: Profile.model_validate({**body, "name": name})
                  for name, body in parsed.profiles.items()}
        )
        for tenant in parsed.tenants.values():
            parsed.ceilings.overridden(tenant.ceilings)  # fails now, not at a tenant's request
    except OSError as exc:
        raise PolicyError(f"cannot read the policy file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"the policy file {path} is not TOML: {exc}") from None
    except ValidationError as exc:
        raise PolicyError(f"the policy file {path} is not valid:\n{exc}") from None
    if FUNCTION_PROFILE in profiles:
        raise PolicyError(f"the policy file {path}: the profile name {FUNCTION_PROFILE!r} is "
                          "the code's model functions'; name the profile otherwise")
    for profile in profiles.values():
        _, excesses = fit_to_ceilings(Settings.model_validate(profile.params), parsed.ceilings)
        if excesses:
            raise PolicyError(f"the policy file {path}: profile {profile.name!r} params: "
                              + "; ".join(e.message for e in excesses))
    if parsed.default_profile is not None and parsed.default_profile not in profiles:
        raise PolicyError(f"the policy file {path}: default_profile {parsed.default_profile!r} "
                          f"is none of its profiles ({', '.join(profiles)})")
    return Policy(profiles=profiles, ceilings=parsed.ceilings, tenants=parsed.tenants,
                  default_profile=parsed.default_profile, agents=parsed.agents,
                  mcp=parsed.mcp, budgets=parsed.budgets, deciders=parsed.deciders,
                  prices=parsed.prices, schedules=parsed.schedules)
