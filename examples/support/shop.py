"""The shop behind the support agent: its orders and the refunds it paid, in one SQLite file.

The worker reads it (the `lookup_order` tool) and the back office writes it (a refund a
person approved), so both name the same file: $SUPPORT_SHOP_DB, by default ./shop.db.
"""
from __future__ import annotations

import os
import sqlite3
import uuid
from contextlib import closing
from dataclasses import dataclass

ORDERS = [  # order id, customer, item, total, status
    ("1001", "ada@example.com", "mechanical keyboard", 89.0, "delivered"),
    ("1002", "ada@example.com", "USB-C cable", 12.5, "shipped"),
    ("1003", "grace@example.com", "standing desk", 540.0, "delivered"),
]


@dataclass(frozen=True)
class Refund:
    refund_id: str
    order_id: str
    amount: float


def path() -> str:
    return os.environ.get("SUPPORT_SHOP_DB", "shop.db")


def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(path(), timeout=10)
    conn.executescript("""
        CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT, item TEXT,
                                           total REAL, status TEXT);
        CREATE TABLE IF NOT EXISTS refunds (id TEXT PRIMARY KEY, order_id TEXT UNIQUE, amount REAL);
    """)
    conn.executemany("INSERT OR IGNORE INTO orders VALUES (?, ?, ?, ?, ?)", ORDERS)
    conn.commit()
    return conn


def find_order(order_id: str) -> dict | None:
    """The order with its refund, if one was paid; None if there is no such order."""
    with closing(_connect()) as conn:
        row = conn.execute(
            "SELECT o.id, o.item, o.total, o.status, r.id FROM orders o "
            "LEFT JOIN refunds r ON r.order_id = o.id WHERE o.id = ?", (order_id,)).fetchone()
    if row is None:
        return None
    return {"order_id": row[0], "item": row[1], "total": row[2], "status": row[3],
            "refund_id": row[4]}


def pay_refund(order_id: str, amount: float) -> Refund:
    """Pay a refund once per order: asking again returns the refund already paid."""
    order = find_order(order_id)
    if order is None:
        raise ValueError(f"no order {order_id}")
    if amount <= 0 or amount > order["total"]:
        raise ValueError(f"a refund of order {order_id} is between 0 and {order['total']}")
    with closing(_connect()) as conn:
        conn.execute("INSERT OR IGNORE INTO refunds VALUES (?, ?, ?)",
                     (f"rf_{uuid.uuid4().hex[:10]}", order_id, amount))
        conn.commit()
        refund_id, paid = conn.execute("SELECT id, amount FROM refunds WHERE order_id = ?",
                                       (order_id,)).fetchone()
    return Refund(refund_id, order_id, paid)
