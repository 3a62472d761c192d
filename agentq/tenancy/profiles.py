"""Model profiles: the endpoints, keys and models an operator offers to tenants (inv. 9).

A profile is the only way to an endpoint: tenants name a profile and a model, never a
URL or a key. Each profile says which provider kind speaks to it, where it is, which
environment variable holds the operator's key, the models on offer, the parameters new
conversations start with, which tenants may use it, and whether tenants bring their own key.
"""
from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentq.core.settings import NAME_PATTERN, Settings
from agentq.providers.kinds import KINDS, ProviderKind
from agentq.tenancy.prices import ModelPrice

ANY = "*"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# What happens with a tenant's own key: never used; used when set, else the operator's
# key; or needed (a tenant without one gets a `missing_api_key` error, never the operator's).
TenantKeyUse = Literal["never", "optional", "required"]
# Settings a profile must not preset: they say which profile and model, not how to call it.
_NOT_PARAMS = frozenset({"profile", "provider", "model"})


class Profile(BaseModel):
    """One entry of `[profiles.NAME]` in the operator's policy file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    kind: str
    base_url: str | None = None  # None: the kind's official endpoint
    key_env: str | None = None  # None: the kind's own variable (OPENAI_API_KEY, …)
    models: tuple[str, ...] = (ANY,)  # "*": any model name
    default_model: str | None = None  # for a conversation that names none
    params: dict[str, Any] = Field(default_factory=dict)  # settings new conversations start with
    tenants: tuple[str, ...] | None = None  # None: every tenant
    tenant_keys: TenantKeyUse = "never"
    extra_body: tuple[str, ...] = ()  # extra_body fields tenants may send ("*": any)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)  # over the policy's [prices]

    @field_validator("kind")
    @classmethod
    def _a_known_kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        return value

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("base_url must be an http(s) URL")
            if parts.username or parts.password:
                raise ValueError("base_url must not hold credentials: put the key in key_env")
        return value

    @field_validator("key_env")
    @classmethod
    def _a_variable_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError("key_env is the NAME of an environment variable, never the key")
        return value

    @field_validator("params")
    @classmethod
    def _settings_it_may_preset(cls, value: dict[str, Any]) -> dict[str, Any]:
        fixed = sorted(_NOT_PARAMS & set(value))
        if fixed:
            raise ValueError(f"params cannot set {', '.join(fixed)}")
        Settings.model_validate(value)  # the same shapes a tenant's settings have
        return value

    @model_validator(mode="after")
    def _default_model_on_offer(self) -> Profile:
        if not self.models:
            raise ValueError("models must name at least one model, or \"*\"")
        if self.default_model is not None and not self.offers(self.default_model):
            raise ValueError("default_model must be one of models")
        if self.kind_of.offline and self.tenant_keys != "never":
            raise ValueError(f"a {self.kind} profile calls no API: tenant_keys must be \"never\"")
        return self

    @property
    def kind_of(self) -> ProviderKind:
        return KINDS[self.kind]

    @property
    def url(self) -> str | None:
        """The endpoint calls go to (None for an offline kind)."""
        return self.base_url or self.kind_of.base_url

    @property
    def key_variable(self) -> str | None:
        """The environment variable of the operator's key."""
        return self.key_env or self.kind_of.key_env

    @property
    def chosen_model(self) -> str | None:
        """The model of a conversation that names none."""
        if self.default_model is not None:
            return self.default_model
        return None if self.models[0] == ANY else self.models[0]

    def offers(self, model: str) -> bool:
        return ANY in self.models or model in self.models

    def open_to(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants

    @property
    def open_to_all(self) -> bool:
        return self.tenants is None

    def takes_extra(self, field: str) -> bool:
        return ANY in self.extra_body or field in self.extra_body


def builtin_profiles(*, demo: bool) -> dict[str, Profile]:
    """The profiles of a deployment without a policy file: what a new user expects.

    `openai` and `anthropic` on their official endpoints with OPENAI_API_KEY and
    ANTHROPIC_API_KEY, any model; and, unless demo mode is off, `scripted`.
    """
    found = [
        Profile(name="openai", kind="openai", extra_body=(ANY,)),
        Profile(name="anthropic", kind="anthropic", extra_body=(ANY,)),
    ]
    if demo:
        found.insert(0, Profile(name="scripted", kind="scripted", models=("scripted",),
                                  extra_body=(ANY,)))
    return {profile.name: profile for profile in found}
