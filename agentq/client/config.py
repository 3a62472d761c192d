"""Where the API is and which key to send: arguments first, then AGENTQ_API_URL / AGENTQ_API_KEY."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from agentq.client.errors import ApiError, Unauthorized

DEFAULT_URL = "http://127.0.0.1:8000"
NO_KEY = ("no API key was sent: pass key= or set AGENTQ_API_KEY to a key of the API (`agentq dev` "
          "accepts the AGENTQ_API_KEY it was started with, else prints its key when it starts and "
          "keeps it beside its database, in agentq.db.dev-key by default)")


@dataclass(frozen=True)
class Endpoint:
    url: str
    key: str | None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def explained(self, error: ApiError) -> ApiError:
        """`error`, saying where a key comes from if it is the refusal of a request sent
        without one."""
        if self.key or not isinstance(error, Unauthorized):
            return error
        return Unauthorized(error.status, error.code, f"{error.message}; {NO_KEY}", error.details,
                            error.retry_after_s)


def endpoint(url: str | None, key: str | None, env: Mapping[str, str] | None = None) -> Endpoint:
    """The API's URL and key; the key may be the server's bootstrap form `tenant:secret`
    (stored keys never hold a colon): the secret is what goes in the Authorization header."""
    env = os.environ if env is None else env
    key = key or env.get("AGENTQ_API_KEY") or None
    if key and ":" in key:
        key = key.split(":", 1)[1]
    return Endpoint(url=(url or env.get("AGENTQ_API_URL") or DEFAULT_URL).rstrip("/"), key=key)
