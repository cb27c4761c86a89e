"""
A delivery node killed at a named point of an SMTP transaction (the worker's ``at_point``
seam): the transaction stops dead there (an exception no handler of the worker catches, so it
neither writes an outcome nor gives its rows back), as if its process had died; its rows come
due again when the lease ends and the node, as a restarted one would, claims and sends them
again (docs/decisions.md, "Delivery transactions").
"""

import time

import pytest_twisted as pt
from twisted.internet import reactor, task

LEASE = "2"


class Killed(BaseException):
    """The node's death at a point: not an ``Exception``, so no handler of the worker takes it."""


def kill_once_at(mta, point: str) -> list[str]:
    """The first transaction that reaches ``point`` dies there; the names of the points it died at."""
    died: list[str] = []

    def at_point(name: str) -> None:
        if name == point and not died:
            died.append(name)
            raise Killed(name)

    mta.parts.delivery.at_point = at_point
    return died


async def delivered(mta, email_id: str, seconds: float = 30) -> list[dict]:
    """The email's deliveries once all are delivered (polled: the dead transaction never lands,
    so the worker never settles)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rows = await mta.deliveries(email_id)
        if all(r["status"] == "delivered" for r in rows):
            return rows
        await task.deferLater(reactor, 0.1, lambda: None)
    raise AssertionError(f"not delivered: {rows}")


async def events_of(mta, email_id: str, type: str) -> list[dict]:
    return [e for e in await mta.events(type) if e["email_id"] == email_id]


@pt.ensureDeferred
async def test_a_node_killed_before_data_delivers_each_message_exactly_once(start_mta_with):
    """Killed with the transaction signed and handed to the SMTP client, before any of it went
    out: each message reaches the receiver once, by the attempt after the lease."""
    mta = await start_mta_with(MAILSVC_DELIVERY_LEASE_SECONDS=LEASE)
    mta.route("example.net")
    _, key = await mta.sender()
    died = kill_once_at(mta, "sending")
    email_id = await mta.send(key, ["ann@example.net", "bob@example.net"])
    rows = await delivered(mta, email_id)
    assert died == ["sending"]
    assert [r["attempts"] for r in rows] == [1, 1]  # the dead attempt wrote nothing
    assert sorted(rcpt for m in mta.sink.messages for rcpt in m.rcpt_to) == ["ann@example.net",
                                                                               "bob@example.net"]
    assert len(await events_of(mta, email_id, "email.delivered")) == 2


@pt.ensureDeferred
async def test_a_node_killed_after_the_reply_sends_at_most_one_duplicate_and_each_event_once(start_mta_with):
    """Killed after the receiver's 250 and before the outcome is written: the message went out
    and goes out once more when the lease ends (at most one duplicate per message: the second
    attempt writes its outcome), and its event is written once, by the attempt that lived."""
    mta = await start_mta_with(MAILSVC_DELIVERY_LEASE_SECONDS=LEASE)
    mta.route("example.net")
    _, key = await mta.sender()
    died = kill_once_at(mta, "replied")
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await delivered(mta, email_id)
    assert died == ["replied"]
    assert row["attempts"] == 1
    assert len(mta.sink.messages) == 2  # the dead attempt's copy and the one that was recorded
    assert len(await events_of(mta, email_id, "email.delivered")) == 1
