"""The shapes of /v1/profiles: the model profiles a tenant may use, and its own provider keys."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from agentq.api.common import AnswerModel, BodyModel


class PutKey(BodyModel):
    """A tenant's own provider key for one profile: stored sealed, never shown again."""

    api_key: Annotated[str, StringConstraints(min_length=8, max_length=1024,
                                              pattern=r"^[\x21-\x7e]+$")] = Field(
        description="printable ASCII without spaces, as a provider issues it")


class ProfileOut(AnswerModel):
    """A model profile as a tenant sees it: what it may pick, never where or with which key."""

    name: str
    kind: str
    models: list[str] = Field(description='the models on offer; "*": any model name')
    default_model: str | None
    tenant_keys: Literal["never", "optional", "required"] = Field(
        description="never: the operator's key; optional: yours if set, else the operator's; "
                    "required: yours, or calls fail with missing_api_key")
    own_key_set: bool = Field(description="whether you have set a key for this profile")
    extra_body: list[str] = Field(description='extra_body fields you may send; "*": any')


class ProfileList(AnswerModel):
    profiles: list[ProfileOut]
