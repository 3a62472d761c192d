"""Which endpoint and key a model call uses, resolved per call from the operator's policy.

`resolve_endpoint` is the one place that picks a URL and a key (inv. 9): the profile's
URL, with the tenant's own key where the profile takes one, else the key in the
variable the operator named. Nothing a tenant sends chooses either. Errors say what a
tenant may know: which profile, never which variable (the operator's log has that).
A call of the `function` profile goes to the operator's model function of that name
(agentq.providers.function), in this process.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from agentq.core.request import Request
from agentq.core.settings import FUNCTION_PROFILE, Settings
from agentq.providers.base import CallContext, Delta, Endpoint, ModelResponse, Provider
from agentq.providers.errors import ProviderError
from agentq.providers.function import FunctionModels, FunctionProvider
from agentq.telemetry import tracing
from agentq.telemetry.attributes import chat_attributes
from agentq.tenancy.policy import Policy
from agentq.tenancy.profiles import Profile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Owner:
    """The tenant a conversation belongs to, and its own key for one profile, if it set one."""

    tenant: str
    key: str | None = field(default=None, repr=False)


# (conversation_id, profile name) -> its owner; None if the conversation is gone.
OwnerLookup = Callable[[str, str], Owner | None]


def resolve_endpoint(profile: Profile, owner: Owner | None, env: Mapping[str, str]) -> Endpoint:
    """The endpoint and key of one call on `profile` for `owner`, or a permanent ProviderError."""
    if profile.kind_of.offline:
        return Endpoint(profile.name, profile.kind)
    own_key = owner.key if owner is not None and profile.tenant_keys != "never" else None
    if own_key:
        return Endpoint(profile.name, profile.kind, profile.url, own_key)
    if profile.tenant_keys == "required":
        raise ProviderError(
            f"profile {profile.name!r} uses your own API key and none is set: "
            f"PUT /v1/profiles/{profile.name}/key", code="missing_api_key",
        )
    variable = profile.key_variable
    key = (env.get(variable) or "").strip() if variable else ""
    if not key:
        log.error("profile %r: the environment variable %s that holds its key is not set",
                  profile.name, variable)
        raise ProviderError(f"no API key is configured for profile {profile.name!r}",
                            code="missing_api_key")
    return Endpoint(profile.name, profile.kind, profile.url, key)


class ModelAccess:
    """Providers for conversations, each call sent where the operator's profile says."""

    def __init__(self, policy: Policy, owners: OwnerLookup | None = None,
                 env: Mapping[str, str] | None = None, functions: FunctionModels | None = None
                 ) -> None:
        """`functions`: the model functions this process's code agents define."""
        self.policy = policy
        self._owners = owners
        self._env = os.environ if env is None else env
        self._functions = FunctionProvider(functions or FunctionModels())

    def provider_for(self, settings: Settings) -> Provider:
        """The provider of a conversation with these settings (resolved at each call)."""
        return ProfiledProvider(self)

    def endpoint_url(self, settings: Settings) -> str | None:
        """The endpoint a conversation's calls go to, which its circuit breaker is kept by;
        None for an offline kind or a profile the policy no longer has."""
        profile = self.policy.profiles.get(settings.profile)
        return None if profile is None or profile.url is None else profile.url.rstrip("/")

    def endpoint(self, ctx: CallContext) -> tuple[Profile, Endpoint]:
        """The profile and endpoint of one call, checked again at call time (the policy
        file may have changed since the conversation was created)."""
        name = ctx.settings.profile
        profile = self.policy.profiles.get(name)
        owner = None
        if profile is not None and (profile.tenants is not None or profile.tenant_keys != "never"):
            owner = self._owner(ctx.conversation_id, name)
        if profile is None or (profile.tenants is not None and (
                owner is None or not profile.open_to(owner.tenant))):
            raise ProviderError(f"profile {name!r} is not available", code="unknown_profile")
        return profile, resolve_endpoint(profile, owner, self._env)

    def route(self, request: Request, ctx: CallContext) -> tuple[Provider, Endpoint, str]:
        """The adapter, the endpoint and the model of one call: the profile's kind at its
        endpoint, or the operator's model function the settings name."""
        if ctx.settings.profile == FUNCTION_PROFILE:
            return self._functions, Endpoint(FUNCTION_PROFILE, FUNCTION_PROFILE), request.model
        profile, endpoint = self.endpoint(ctx)
        model = request.model or ctx.settings.model or profile.chosen_model
        if model is None or not profile.offers(model):
            raise ProviderError(f"profile {profile.name!r} does not offer model {model!r}",
                                code="model_not_offered")
        return profile.kind_of.adapter(), endpoint, model

    def _owner(self, conversation_id: str, profile: str) -> Owner | None:
        return self._owners(conversation_id, profile) if self._owners is not None else None


class ProfiledProvider:
    """The `Provider` of one conversation: resolves its endpoint, then lets the kind's adapter call it.

    Each call is a `chat {model}` span (GenAI conventions) while tracing is on: here is the
    one place that knows the provider, the model and the endpoint of a call."""

    def __init__(self, access: ModelAccess) -> None:
        self._access = access

    def stream(
        self, request: Request, ctx: CallContext, cancel: threading.Event
    ) -> Iterator[Delta | ModelResponse]:
        adapter, endpoint, model = self._access.route(request, ctx)
        request = dataclasses.replace(request, model=model)
        tracer = tracing()
        if not tracer.enabled:
            yield from adapter.stream(request, dataclasses.replace(ctx, endpoint=endpoint), cancel)
            return
        with tracer.chat(chat_attributes(kind=endpoint.kind, model=model, base_url=endpoint.base_url,
                                         conversation_id=ctx.conversation_id), request) as span:
            for item in adapter.stream(request, dataclasses.replace(ctx, endpoint=endpoint), cancel):
                if isinstance(item, ModelResponse):
                    span.answered(model=item.model, finish_reason=item.finish_reason,
                                  usage=item.usage, text=item.text, calls=item.tool_calls)
                yield item


def provider_for(settings: Settings, env: Mapping[str, str] | None = None) -> Provider:
    """A provider under the built-in policy (no policy file, no tenant keys); for tests and tools."""
    return ModelAccess(Policy.default(), env=env).provider_for(settings)
