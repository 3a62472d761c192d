"""Deterministic identities: canonical JSON, step keys and Celery task ids.

A step key is derived from stable content only (docs/design.md §4). Never a counter
(docs/design.md §16.1: counters collide when code paths diverge) and never a wall-clock value
(invariant 7: a timestamp in a key makes a resumed step look new).
"""
from __future__ import annotations

import hashlib
import json
import math
import uuid
from typing import Any, Literal

StepKind = Literal["llm", "tool", "expire", "compact", "child", "guardrail"]
# The model step's kind, as stored in the ledger and hashed into every step key (so in every
# task id): "llm", from before the code called it the model step. Renaming the value would
# give every step in flight a new key, so the code names it MODEL_STEP and keeps the value.
MODEL_STEP: StepKind = "llm"

# Fixed namespace for task ids: uuid5(AGENTQ_NAMESPACE, step_key).
AGENTQ_NAMESPACE = uuid.UUID("7b0c9f4e-5d1a-5e8b-9a43-2f6c1d0e8a57")


def _check_floats(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("canonical JSON has no NaN or infinity")
    if isinstance(value, dict):
        for item in value.values():
            _check_floats(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_floats(item)
    return value


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, shortest round-trip floats, UTF-8 text."""
    return json.dumps(
        _check_floats(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def step_key(conversation_id: str, kind: StepKind, ref: dict[str, Any]) -> str:
    """sha256 of `conversation_id:kind:canonical_json(ref)`, hex."""
    text = f"{conversation_id}:{kind}:{canonical_json(ref)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def task_id(key: str) -> str:
    """The Celery task id of a step: uuid5 of its key, so a resend reuses it."""
    return str(uuid.uuid5(AGENTQ_NAMESPACE, key))


def round_id(model_step_key: str) -> str:
    """The round id of one model response, minted from its step key.

    Deterministic on purpose: a redelivered model step streams under the same round id
    (its `attempt` tells the tries apart), and no other response can ever share it.
    """
    return str(uuid.uuid5(AGENTQ_NAMESPACE, "round:" + model_step_key))


def scripted_call_id(model_step_key: str, index: int) -> str:
    """`call_` + sha256(step_key:index)[:24] (docs/design.md §13)."""
    digest = hashlib.sha256(f"{model_step_key}:{index}".encode()).hexdigest()
    return "call_" + digest[:24]
