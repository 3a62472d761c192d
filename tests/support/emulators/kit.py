"""One provider adapter wired to its emulator, so one test body can run against each."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from agentq.core.request import Message, Request, ToolSpec
from agentq.core.settings import Settings, parse_settings
from agentq.tenancy.policy import Policy
from agentq.tenancy.profiles import Profile
from agentq.tenancy.access import ModelAccess
from agentq.providers.base import CallContext, Delta, ModelResponse, Provider
from tests.support.emulators.anthropic_api import AnthropicEmulator
from tests.support.emulators.openai_api import OpenAIEmulator
from tests.support.emulators.responses_api import ResponsesEmulator
from tests.support.emulators.server import Emulator

MODEL = "emu-model-1"
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HELLO = Request(system="Be brief.", messages=(Message("user", "Weather in Oslo?"),),
                tools=(WEATHER,), model=MODEL)

_ADAPTERS: dict[str, tuple[type[Emulator], str]] = {
    "openai": (OpenAIEmulator, "OPENAI_API_KEY"),
    "anthropic": (AnthropicEmulator, "ANTHROPIC_API_KEY"),
    "openai_responses": (ResponsesEmulator, "OPENAI_API_KEY"),
}
# The body field each API takes the answer's token limit in.
MAX_TOKENS_FIELD = {"openai": "max_tokens", "anthropic": "max_tokens",
                    "openai_responses": "max_output_tokens"}


@contextmanager
def running(name: str) -> Iterator[Emulator]:
    """The emulator of provider `name`, serving until the block ends."""
    with _ADAPTERS[name][0]() as emulator:
        yield emulator


def kit_fixtures(*names: str) -> tuple[Any, Any]:
    """The `served` and `kit` fixtures of a module of provider tests: one emulator per module
    and provider (several names run each test on each), cleared around every test."""

    @pytest.fixture(scope="module", params=list(names))
    def served(request: pytest.FixtureRequest) -> Iterator[Kit]:
        with running(request.param) as emulator:
            yield Kit(request.param, emulator)

    @pytest.fixture
    def kit(served: Kit) -> Iterator[Kit]:
        served.emulator.clear()
        yield served
        served.emulator.clear()

    return served, kit


@dataclass
class Kit:
    """A provider's adapter, its emulator, and the operator's profile and environment that join them."""

    name: str
    emulator: Any

    @property
    def key_variable(self) -> str:
        return _ADAPTERS[self.name][1]

    @property
    def env(self) -> dict[str, str]:
        return {self.key_variable: self.emulator.api_key}

    def profile(self, **options: Any) -> Profile:
        """The profile named like the provider, pointing at the emulator."""
        return Profile(name=self.name, kind=self.name, base_url=self.emulator.base_url, **options)

    def policy(self, **options: Any) -> Policy:
        return Policy(profiles={self.name: self.profile(**options)})

    def access(self, env: dict[str, str] | None = None, **profile: Any) -> ModelAccess:
        return ModelAccess(self.policy(**profile), env=self.env if env is None else env)

    def provider(self, env: dict[str, str] | None = None, **profile: Any) -> Provider:
        """The provider the runtime would get, through the profile and `env`."""
        return self.access(env, **profile).provider_for(self.settings())

    def settings(self, **options: Any) -> Settings:
        return parse_settings({"profile": self.name, "model": MODEL, **options})

    def ctx(self, settings: Settings | None = None, *, step_key: str = "step-1") -> CallContext:
        return CallContext("conv-1", step_key, "round-1", 1, 0, settings or self.settings())

    def run(
        self,
        request: Request = HELLO,
        *,
        settings: Settings | None = None,
        cancel: threading.Event | None = None,
        env: dict[str, str] | None = None,
        profile: dict[str, Any] | None = None,
    ) -> list[Delta | ModelResponse]:
        """Everything the adapter yields for one call."""
        provider = self.provider(env, **(profile or {}))
        stream = provider.stream(request, self.ctx(settings), cancel or threading.Event())
        return list(stream)

    def answer(self, request: Request = HELLO, **options: Any) -> ModelResponse:
        """The one final response of a call (after its deltas)."""
        items = self.run(request, **options)
        assert isinstance(items[-1], ModelResponse)
        assert sum(isinstance(item, ModelResponse) for item in items) == 1
        return items[-1]
