"""Keyset pages (web/pagination.py): one row more is read than answered, and every list route
refuses a hostile limit or cursor with a 422 naming it before it reads anything."""
from __future__ import annotations

import pytest

from agentq.web.pagination import page_of
from tests.support.agents_for_tests import LOOKUP_SCRIPT

ROWS = list(range(1, 8))


def reader(rows: list[int]):
    """A list read from `rows`, recording each limit it was asked for."""
    asked: list[int] = []

    def read(limit: int) -> list[int]:
        asked.append(limit)
        return rows[:limit]

    return read, asked


def test_a_page_reads_one_row_more_than_it_answers_and_names_its_last_row_next():
    read, asked = reader(ROWS)
    page = page_of(read, 3, lambda row: f"after-{row}")
    assert asked == [4] and page.rows == [1, 2, 3] and page.next_cursor == "after-3"


def test_the_last_page_has_no_next_cursor_even_when_it_is_full():
    read, _ = reader(ROWS)
    assert page_of(read, 7, str).next_cursor is None
    assert page_of(read, 7, str).rows == ROWS


def test_an_empty_list_is_one_empty_page():
    read, _ = reader([])
    page = page_of(read, 50, str)
    assert page.rows == [] and page.next_cursor is None


# ---- hostile queries on every paginated route ----------------------------------------------------

LISTS = ["/v1/conversations", "/v1/agents", "/v1/agents/support/versions", "/v1/tool-calls"]
HOSTILE_LIMITS = ["0", "-1", "201", "99999999999999999999999", "ten", "1e3", ""]


@pytest.fixture
def agent(api, alice):
    """An agent of alice's tenant, so that its versions can be listed."""
    body = {"name": "support", "settings": {"tools": ["lookup"], "script": LOOKUP_SCRIPT}}
    assert api.client.post("/v1/agents", json=body, headers=alice).status_code == 201


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("limit", HOSTILE_LIMITS)
def test_a_limit_out_of_range_or_not_a_number_is_422_naming_it(api, alice, agent, path, limit):
    answer = api.get(f"{path}?limit={limit}", alice)
    assert answer.status_code == 422, answer.json
    assert [d["loc"][-1] for d in answer.json["error"]["details"]] == ["limit"]


@pytest.mark.parametrize(("path", "cursor"), [
    ("/v1/conversations", "%00"), ("/v1/conversations", "x" * 256), ("/v1/conversations", ""),
    ("/v1/agents", "%1b[2J"), ("/v1/agents", "x" * 256),
    ("/v1/agents/support/versions", "-1"), ("/v1/agents/support/versions", "two"),
    ("/v1/agents/support/versions", str(2**31)),
    ("/v1/tool-calls", "no-slash"), ("/v1/tool-calls", "a/b/c"),
])
def test_a_malformed_cursor_is_422_naming_it(api, alice, agent, path, cursor):
    answer = api.get(f"{path}?cursor={cursor}", alice)
    assert answer.status_code == 422, answer.json
    assert [d["loc"][-1] for d in answer.json["error"]["details"]] == ["cursor"]


def test_a_cursor_naming_nothing_is_an_empty_last_page(api, alice, agent):
    answer = api.get("/v1/conversations?cursor=zzzz-no-such-conversation", alice)
    assert answer.status_code == 200
    assert answer.json == {"conversations": [], "next_cursor": None}


def test_conversations_are_walked_a_page_at_a_time_without_gaps_or_repeats(api, alice):
    made = sorted(api.create(alice) for _ in range(5))
    seen, cursor, pages = [], None, 0
    while True:
        page = api.get("/v1/conversations?limit=2" + (f"&cursor={cursor}" if cursor else ""),
                       alice).json
        seen += [item["id"] for item in page["conversations"]]
        pages, cursor = pages + 1, page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and sorted(seen) == made and len(seen) == len(set(seen))


def test_agent_versions_are_walked_a_page_at_a_time(api, alice, agent):
    body = {"settings": {"tools": ["lookup"], "script": LOOKUP_SCRIPT}}
    for _ in range(2):
        assert api.client.post("/v1/agents/support/versions", json=body,
                               headers=alice).status_code == 201
    first = api.get("/v1/agents/support/versions?limit=2", alice).json
    assert [v["version"] for v in first["versions"]] == [1, 2] and first["next_cursor"] == 2
    last = api.get("/v1/agents/support/versions?limit=2&cursor=2", alice).json
    assert [v["version"] for v in last["versions"]] == [3] and last["next_cursor"] is None
