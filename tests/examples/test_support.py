"""examples/support end to end: `agentq api` and a worker on PostgreSQL and Redis, the
customer's `app.py ask` and the back office's `app.py review` as separate processes."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from agentq.client import Client
from tests.support.processes import ROOT, wait_for
from tests.support.api_stack import ApiStack

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

EXAMPLE = ROOT / "examples" / "support"


@pytest.fixture
def support(tmp_path, pg_url, redis_url):
    shop_db = str(tmp_path / "shop.db")
    stack = ApiStack(tmp_path, pg_url, redis_url, concurrency=4, AGENTQ_TOOLS="tools,agent",
                     OPENAI_API_KEY="",  # the scripted agent, whatever the machine has set
                     PYTHONPATH=os.pathsep.join([str(EXAMPLE), str(ROOT)]), SUPPORT_SHOP_DB=shop_db)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTQ_", "OPENAI_"))}
    env.update(AGENTQ_API_URL=stack.url, AGENTQ_API_KEY=f"sdk:{stack.key}", SUPPORT_SHOP_DB=shop_db,
               PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    try:
        yield stack, env, shop_db
    finally:
        stack.stop()


def app(env, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "app.py", *args], cwd=EXAMPLE, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen)


def waiting_refunds(stack: ApiStack) -> list:
    with Client(stack.url, stack.key) as client:
        return [c for c in client.pending_calls(executor="human").tool_calls if c.name == "refund"]


def test_a_refund_the_back_office_approves_is_paid_once_and_the_customer_hears_of_it(support):
    stack, env, shop_db = support
    customer = app(env, "ask", "I'd like a refund for order 1001, please")
    wait_for(lambda: waiting_refunds(stack), timeout_s=60, what="the refund to wait for a person")
    review = app(env, "review", "--by-the-rules")
    reviewed, _ = review.communicate(timeout=60)
    assert review.returncode == 0, reviewed
    assert "refunded 89.00 on order 1001" in reviewed and "1 refund(s) answered" in reviewed
    said, _ = customer.communicate(timeout=60)
    assert customer.returncode == 0, said
    assert "Let me look up order 1001. Your keyboard was delivered." in said
    assert "(waiting for the back office to approve the refund)" in said
    assert "(back office: {'amount': 89.0, 'approved': True, 'refund_id': 'rf_" in said
    assert "The back office has answered your refund request." in said
    with sqlite3.connect(shop_db) as conn:
        assert conn.execute("SELECT order_id, amount FROM refunds").fetchall() == [("1001", 89.0)]


def test_a_second_refund_of_the_same_order_is_rejected_with_the_reason(support):
    stack, env, shop_db = support
    for expected in ("refunded 89.00 on order 1001", "the order was refunded already"):
        customer = app(env, "ask", "Refund order 1001")
        wait_for(lambda: waiting_refunds(stack), timeout_s=60, what="the refund to wait for a person")
        reviewed, _ = app(env, "review", "--by-the-rules").communicate(timeout=60)
        assert expected in reviewed
        said, _ = customer.communicate(timeout=60)
        assert customer.returncode == 0, said
    assert "{'reason': 'the order was refunded already', 'approved': False}" in said
    with sqlite3.connect(shop_db) as conn:
        assert conn.execute("SELECT count(*) FROM refunds").fetchone() == (1,)
