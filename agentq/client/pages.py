"""A listing's answer as a page: iterating it yields every item, page after page.

As in the OpenAI SDK, `for call in client.pending_calls()` goes through all the calls,
fetching the next page as it reaches the end of one (`async for` with the AsyncClient);
`page.items` are this page's only, `page.next_cursor` names the next one (None: this is
the last), `page.next_page()` fetches it. A list the API answers whole (a conversation's
tool calls, the webhooks) is a page without a next one, so every listing reads alike. The
answer's own fields stay readable too (`page.tool_calls`, `page.conversations`).
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agentq.client.calls import Listing

T = TypeVar("T")


class _Paged(Generic[T]):
    """What a page holds, whichever client fetched it."""

    def __init__(self, answer: BaseModel, listing: Listing) -> None:
        self.answer, self.listing = answer, listing

    @property
    def items(self) -> list[T]:
        """This page's items."""
        return list(getattr(self.answer, self.listing.items))

    @property
    def next_cursor(self) -> Any:
        """What names the next page; None if this is the last."""
        return None if self.listing.cursor is None else getattr(self.answer, self.listing.cursor)

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    def __getattr__(self, name: str) -> Any:
        """The answer's own fields (`tool_calls`, `next_after_seq`, …), as before pages."""
        answer = self.__dict__.get("answer")
        if answer is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(answer, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.items)} items, next_cursor={self.next_cursor!r})"


class Page(_Paged[T]):
    """One page of a listing; iterating it yields every item, this page's and the next ones'."""

    def __init__(self, answer: BaseModel, listing: Listing,
                 fetch: Callable[[Any], Page[T]]) -> None:
        super().__init__(answer, listing)
        self._fetch = fetch

    def __iter__(self) -> Iterator[T]:
        for page in self.iter_pages():
            yield from page.items

    def next_page(self) -> Page[T] | None:
        """The page after this one (one request), or None if this is the last."""
        return self._fetch(self.next_cursor) if self.has_next_page() else None

    def iter_pages(self) -> Iterator[Page[T]]:
        """This page, then each one after it, fetched as they are reached."""
        page: Page[T] | None = self
        while page is not None:
            yield page
            page = page.next_page()


class AsyncPage(_Paged[T]):
    """One page of a listing; `async for` over it yields every item, this page's and the
    next ones'."""

    def __init__(self, answer: BaseModel, listing: Listing,
                 fetch: Callable[[Any], Awaitable[AsyncPage[T]]]) -> None:
        super().__init__(answer, listing)
        self._fetch = fetch

    async def __aiter__(self) -> AsyncIterator[T]:
        async for page in self.iter_pages():
            for item in page.items:
                yield item

    async def next_page(self) -> AsyncPage[T] | None:
        """The page after this one (one request), or None if this is the last."""
        return await self._fetch(self.next_cursor) if self.has_next_page() else None

    async def iter_pages(self) -> AsyncIterator[AsyncPage[T]]:
        """This page, then each one after it, fetched as they are reached."""
        page: AsyncPage[T] | None = self
        while page is not None:
            yield page
            page = await page.next_page()
