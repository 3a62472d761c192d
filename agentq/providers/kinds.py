"""Provider kinds: which adapter speaks an API, its official endpoint and key variable.

A small open registry: another API shape is one more `ProviderKind` in `KINDS`, and an
operator's profile names its kind. Adapters are imported only when a kind is used, so
an SDK that is not installed costs nothing until a profile asks for it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agentq.providers.base import Provider


@dataclass(frozen=True)
class ProviderKind:
    """One API shape. `base_url` and `key_env` are what a profile of this kind defaults to;
    a kind without `base_url` makes no network call and needs no key."""

    name: str
    adapter: Callable[[], Provider]
    base_url: str | None = None
    key_env: str | None = None

    @property
    def offline(self) -> bool:
        return self.base_url is None


def _scripted() -> Provider:
    from agentq.providers.scripted import ScriptedProvider

    return ScriptedProvider()


def _openai() -> Provider:
    from agentq.providers.openai_chat import OpenAIProvider

    return OpenAIProvider()


def _openai_responses() -> Provider:
    from agentq.providers.openai_responses import OpenAIResponsesProvider

    return OpenAIResponsesProvider()


def _anthropic() -> Provider:
    from agentq.providers.anthropic import AnthropicProvider

    return AnthropicProvider()


KINDS: Mapping[str, ProviderKind] = MappingProxyType({kind.name: kind for kind in (
    ProviderKind("scripted", _scripted),
    ProviderKind("openai", _openai, "https://api.openai.com/v1", "OPENAI_API_KEY"),
    ProviderKind("openai_responses", _openai_responses, "https://api.openai.com/v1", "OPENAI_API_KEY"),
    ProviderKind("anthropic", _anthropic, "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
)})
