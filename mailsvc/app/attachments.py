"""
A send's ``path`` attachments fetched (all at once, within ATTACHMENT_FETCH_SECONDS), each
checked as an inline one is, and all of them together within MAX_ATTACHMENT_BYTES.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
from twisted.internet import defer

from mailsvc.domain.email import MAX_ATTACHMENT_BYTES, Attachment, check_attachment_content
from mailsvc.domain.errors import Invalid
from mailsvc.outside.fetch import FetchFailed, TargetRefused

#: All of a request's ``path`` attachments are fetched at once, within this many seconds:
#: well inside the 60 s request timeout and the 90 s idempotency claim.
ATTACHMENT_FETCH_SECONDS = 30

#: Fetches a URL: ``(url, max_bytes, timeout)`` to ``(status, headers, body)``.
Fetch = Callable[[str, int, float], Awaitable[tuple[int, dict, bytes]]]


class AttachmentFetch:
    def __init__(self, fetch: Fetch | None):
        self._fetch = fetch

    async def __call__(self, attachments: tuple[Attachment, ...]) -> tuple[Attachment, ...]:
        """``attachments`` with the ``path`` ones' content fetched."""
        inline = sum(len(a.content) for a in attachments if a.content is not None)
        paths = [a for a in attachments if a.content is None]
        if not paths:
            return attachments
        if self._fetch is None:
            raise Invalid("attachments", "attachments: `path` is not available on this server")
        fetches = [defer.ensureDeferred(self._fetch_one(self._fetch, a, MAX_ATTACHMENT_BYTES - inline))
                   for a in paths]
        try:
            bodies = await defer.gatherResults(fetches, consumeErrors=True)
        except defer.FirstError as e:
            for other in fetches:
                other.cancel()
            error = e.subFailure.value
            assert error is not None  # a Failure always holds its exception
            raise error from None
        if inline + sum(map(len, bodies)) > MAX_ATTACHMENT_BYTES:
            raise Invalid("attachments", f"attachments: more than {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MiB together")
        fetched = iter(bodies)
        return tuple(a if a.content is not None else attrs.evolve(a, content=next(fetched)) for a in attachments)

    @staticmethod
    async def _fetch_one(fetch: Fetch, a: Attachment, max_bytes: int) -> bytes:
        path = a.path
        assert path is not None  # called for a ``path`` attachment
        try:
            status, _, body = await fetch(path, max_bytes, ATTACHMENT_FETCH_SECONDS)
        except (FetchFailed, TargetRefused) as e:
            # A refused address, a redirect, an oversized body, a timeout: the request's
            # fault, not ours (422, never 500).
            raise Invalid("attachments", f"attachments: fetching {a.path} failed: {e.message}") from None
        if not 200 <= status < 300:
            raise Invalid("attachments", f"attachments: fetching {a.path} answered HTTP {status}")
        check_attachment_content(a.filename, body)
        return body


def fetched_content(a: Attachment) -> bytes:
    """An attachment's bytes once ``AttachmentFetch`` has run (a ``path`` one's fetched by then)."""
    assert a.content is not None  # the fetch filled in every path attachment's content
    return a.content
