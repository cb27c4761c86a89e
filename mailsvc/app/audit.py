"""
The operator's audit log and the named operator tokens: who did what over the
operator API (the queue, the tenants, the destinations, the tokens, operators' accounts) and
users' set-password links. An entry is written in the transaction of the change it records
(``Entry``, given to the use case that makes the change), so that no change goes unrecorded:
when the entry cannot be written, the change is rolled back. Besides the configured token (named ``operator``),
tokens are made and revoked over the operator API; only an HMAC of each is stored, under a
key derived from the master key, as API keys are (app/apikeys.py).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

import attrs

from mailsvc import timefmt
from mailsvc.domain.audit import AuditFilter
from mailsvc.domain.errors import Conflict, NotFound
from mailsvc.domain.paging import Page
from mailsvc.ids import uuid7
from mailsvc.store import audit
from mailsvc.store.database import Database, Transaction

#: The audit name of the operator token from the configuration or the state directory.
CONFIGURED_TOKEN_NAME = "operator"
#: Named operator tokens start so (the configured one starts ``op_``).
TOKEN_TAG = "opn_"


async def record(txn: Transaction, seconds: float, actor: str, action: str, **detail) -> None:
    """An entry written in the transaction of the change it records, at ``seconds``: how the
    account's own changes (its keys, domains, members) are logged, with the account's
    ``tenant_id`` in ``detail`` (what its Activity page reads)."""
    await audit.write(txn, uuid7(seconds), timefmt.from_seconds(seconds), actor, action, None, None, detail)


class AuditLog:
    def __init__(self, clock, db: Database):
        self._clock = clock
        self._db = db

    async def write(self, actor: str, action: str, filter: dict | None = None, count: int | None = None,
                    **detail) -> None:
        now = self._clock.seconds()
        await audit.write(self._db, uuid7(now), timefmt.from_seconds(now), actor, action, filter, count, detail)

    async def write_in(self, txn: Transaction, seconds: float, actor: str, action: str, filter: dict | None,
                       count: int | None, detail: dict) -> None:
        """An entry written in the transaction of what it records."""
        await audit.write(txn, uuid7(seconds), timefmt.from_seconds(seconds), actor, action, filter, count, detail)

    def seconds(self) -> float:
        """Now, on the log's clock (an entry's time)."""
        return self._clock.seconds()

    def entry(self, actor: str, action: str, **detail) -> Entry:
        """An entry for the use case making the change to write in its transaction."""
        return Entry(self, actor, action, detail)

    async def entries(self, page: Page, found: AuditFilter = AuditFilter()) -> tuple[list[dict], bool]:
        return await audit.entries(self._db, page, found)


@attrs.frozen
class Entry:
    """An audit entry still to be written, in the transaction of the change it records."""

    log: AuditLog
    actor: str
    action: str
    detail: dict = attrs.Factory(dict)

    async def write_in(self, txn: Transaction, **more) -> None:
        """Written with ``more`` detail (what only the change knows: the new row's id)."""
        await self.log.write_in(txn, self.log.seconds(), self.actor, self.action, None, None,
                                {**self.detail, **more})


class OperatorTokens:
    def __init__(self, clock, db: Database, hmac_key: bytes, log: AuditLog):
        self._clock = clock
        self._db = db
        self._hmac_key = hmac_key
        self._log = log

    def _mac(self, token: str) -> bytes:
        return hmac.new(self._hmac_key, token.encode("utf-8"), hashlib.sha256).digest()

    async def authenticate(self, presented: str) -> str | None:
        """The name of a named token, or None (unknown or revoked: checked on every request)."""
        if not presented.startswith(TOKEN_TAG):
            return None
        return await audit.use_token(self._db, self._mac(presented), timefmt.from_seconds(self._clock.seconds()))

    async def create(self, name: str, by: str) -> tuple[dict, str]:
        """The new token's row and the token itself (shown once)."""
        token = TOKEN_TAG + secrets.token_urlsafe(32)
        now = self._clock.seconds()
        if name == CONFIGURED_TOKEN_NAME:
            raise Conflict(f"name: {CONFIGURED_TOKEN_NAME!r} is the configured token's name")

        async def insert(txn: Transaction) -> dict:
            row = await audit.insert_token(txn, uuid7(now), name, self._mac(token), timefmt.from_seconds(now))
            if row is None:
                raise Conflict("name: an operator token has this name already")
            await self._log.write_in(txn, now, by, "operator_token.create", None, None, detail_of(row))
            return row

        return await self._db.run("create_operator_token", insert), token

    async def list(self) -> list[dict]:
        return await audit.tokens(self._db)

    async def delete(self, token_id: uuid.UUID | None, by: str) -> None:

        async def delete(txn: Transaction) -> None:
            row = await audit.delete_token(txn, token_id) if token_id is not None else None
            if row is None:
                raise NotFound("Operator token")
            await self._log.write_in(txn, self._clock.seconds(), by, "operator_token.delete", None, None,
                                     detail_of(row))

        await self._db.run("delete_operator_token", delete)


def detail_of(row: dict) -> dict:
    return {"token_id": str(row["id"]), "name": row["name"]}
