"""Durable state on PostgreSQL or SQLite: the only package that imports sqlalchemy."""
from agentq.store.audit import ModelCallRecord
from agentq.store.conversations import ConversationInfo
from agentq.store.ledger import NewStep, StepRecord
from agentq.store.migrations import migrate
from agentq.store.store import Store
from agentq.store.sweeper_lock import SweeperLock
from agentq.store.txn import ConversationTxn

__all__ = [
    "ConversationInfo", "ConversationTxn", "ModelCallRecord", "NewStep", "StepRecord", "Store",
    "SweeperLock", "migrate",
]
