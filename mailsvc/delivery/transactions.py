"""
A delivery step's SMTP transactions: the claimed deliveries grouped by what they share (an
email's recipients at one domain, at most the delivery policy's ``recipients_per_transaction``;
one with a message of its own, a test address or a capture-mode recipient alone or by email),
each with its path (``domain/policy.py``) and its message built once. Grouping decides
nothing: what cannot be sent (content expired, a message that fails to build) is returned for
the worker to record.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Hashable

import attrs
from twisted.logger import Logger

from mailsvc.app.messages import Messages, message_of
from mailsvc.delivery.door import Door
from mailsvc.domain import policy
from mailsvc.domain.policy import PathPolicy
from mailsvc.store.deliveries import ClaimedDelivery
from mailsvc.store.delivery_contents import Contents, EmailContent, SigningKey

log = Logger()


@attrs.frozen
class Transaction:
    """Recipients of one SMTP transaction and what they are sent."""

    group: list[ClaimedDelivery]
    email: EmailContent
    #: The delivery policy of the group's account and destination.
    path: PathPolicy
    message: bytes
    #: The sending domain's DKIM key rows to sign with; None: the message is stored signed.
    keys: list[SigningKey] | None
    #: Where its signed bytes are shared with the step's other transactions; None: its own.
    shared: Hashable | None
    #: It stops at the door (a test address, capture mode) instead of leaving.
    at_door: bool = False
    #: The test sender's: signed with the node's test key.
    test_sender: bool = False


@attrs.frozen
class Grouping:
    """A step's transactions, and the claimed deliveries that make none."""

    transactions: list[Transaction]
    #: Deliveries that can no longer be sent as they were accepted, and why (``content_expired``).
    expired: list[tuple[ClaimedDelivery, str]]
    #: Deliveries whose message failed to build (deferred ``transient``).
    unbuilt: list[ClaimedDelivery]


class Transactions:
    """Groups a step's claimed deliveries into transactions (module docstring)."""

    def __init__(self, door: Door, messages: Messages):
        self._door = door
        self._messages = messages

    def of(self, work: list[ClaimedDelivery], contents: Contents) -> Grouping:
        """Each SMTP transaction of ``work``, and the deliveries that make none (what becomes of
        them, the caller records)."""
        groups: dict[tuple, list[ClaimedDelivery]] = defaultdict(list)
        paths: dict[tuple, PathPolicy] = {}
        to_build: dict[uuid.UUID, list[ClaimedDelivery]] = defaultdict(list)  # own messages built per recipient
        expired: list[tuple[ClaimedDelivery, str]] = []
        for w in work:
            email = contents.emails.get(w.email_id)
            why = self._expired(w, email, contents)
            if why is not None:
                expired.append((w, why))
                continue
            assert email is not None  # not expired
            domain = w.recipient.rpartition("@")[2].lower()
            path = policy.resolve(w.account, domain, sending_tls=email.tls)
            own = w.own_message or (email.message is None and email.stream == "broadcast")
            if own and not w.own_message:
                to_build[w.email_id].append(w)
            if self._door.outcome(w.recipient) is not None:
                key: tuple = ("test", w.id)  # each its own outcome
            elif path.capture:
                key = ("capture", w.id) if own else ("capture", w.email_id)
            else:
                key = (w.id,) if own else (w.email_id, domain, w.account.delivery_mode)
            groups[key].append(w)
            paths.setdefault(key, path)
        messages, unbuilt = self._built(contents, to_build, groups)
        transactions = [t for key, group in groups.items()
                        for t in self._chunked(key, group, paths[key], contents, messages)]
        return Grouping(transactions, expired, [w for _, ws in unbuilt for w in ws])

    def _expired(self, w: ClaimedDelivery, email: EmailContent | None, contents: Contents) -> str | None:
        """Why what was accepted can no longer be sent as it was accepted, if it cannot: the
        message is gone (pruned), or its sending domain was deleted (a domain with no keys cannot
        sign: as deleted; the API never leaves one keyless)."""
        if email is None:
            return "the stored message is gone"
        if email.broadcast_id is not None and (
                email.broadcast_id not in contents.broadcasts or email.snapshot is None):
            return "the broadcast's content is gone"
        test_sender = email.domain_id is None and self._door.is_test_sender(email.sender)
        if not test_sender and (
                email.domain_id is None or not (email.signed or contents.keys.get(email.domain_id))):
            return "the sending domain was deleted"
        if test_sender and self._door.outcome(w.recipient) is None:
            # Never real mail in the test domain's name (the accept path lets none through).
            return "the test sender sends to test addresses only"
        return None

    @staticmethod
    def _chunked(key: tuple, group: list[ClaimedDelivery], path: PathPolicy, contents: Contents,
                 messages: dict[uuid.UUID, bytes]):
        """The transactions of one group, ``path.recipients_per_transaction`` recipients at most each."""
        at_door = key[0] in ("test", "capture")
        size = path.recipients_per_transaction
        for start in range(0, len(group), size):
            chunk = group[start:start + size]
            email = contents.emails[chunk[0].email_id]
            test_sender = email.domain_id is None
            keys = None if email.signed or email.domain_id is None else contents.keys[email.domain_id]
            own = contents.own.get(chunk[0].id) or messages.get(chunk[0].id)
            if own is not None:
                yield Transaction(chunk, email, path, own, keys, None, at_door, test_sender)
            else:
                shared: Hashable | None = None
                if test_sender:
                    shared = (email.id, "test")
                elif keys is not None:
                    shared = (email.id, tuple(k.id for k in keys))
                yield Transaction(chunk, email, path, messages[email.id], keys, shared, at_door, test_sender)

    def _built(self, contents: Contents, to_build: dict[uuid.UUID, list[ClaimedDelivery]],
               groups: dict[tuple, list[ClaimedDelivery]],
               ) -> tuple[dict[uuid.UUID, bytes], list[tuple[tuple, list[ClaimedDelivery]]]]:
        """
        The messages ``groups`` send, built once each (or used as stored), by email id and, for
        the recipients' own ones, by delivery id; and the groups whose message failed to build
        (logged), dropped from ``groups``.
        """
        built: dict[uuid.UUID, bytes] = {}
        unbuilt = []
        for key, group in list(groups.items()):
            w = group[0]
            email = contents.emails[w.email_id]
            try:
                if w.email_id in to_build:
                    if w.id not in built:
                        recipients = [one.recipient for one in to_build[w.email_id]]
                        own = self._messages.per_recipient(
                            email, contents.attachments.get(w.email_id, ()), recipients,
                            contents.broadcast_of(email))
                        built.update((one.id, own[one.recipient]) for one in to_build[w.email_id])
                elif not w.own_message and w.email_id not in built:
                    built[w.email_id] = message_of(email, contents.attachments.get(w.email_id, ()))
            except Exception:
                log.failure("building a message of {domain} failed", domain=email.domain)
                unbuilt.append((key, groups.pop(key)))
        return built, unbuilt
