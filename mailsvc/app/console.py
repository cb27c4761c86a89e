"""
The operator console's people (docs/decisions.md, "Operator console"): operators' accounts and
set-password links, on the password sign-in the dashboard's users have (``mailsvc.app.signin``)
but apart: their own tables, cookie, CSRF and link keys and throttle keys, so that neither kind
of session can stand for the other; a session ends after an hour idle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import argon2
import attrs

from mailsvc.app.audit import Entry
from mailsvc.app.signin import Challenge, PasswordSignIn, People, SessionSettings, SignedIn
from mailsvc.app.throttle import Throttle
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.domain.audit import ACTOR_PREFIXES
from mailsvc.domain.errors import Conflict, Invalid, NotFound
from mailsvc.domain.users import new_password, user_address
from mailsvc.ids import uuid7
from mailsvc.store import console as store
from mailsvc.store import two_factor
from mailsvc.store.database import Database, Transaction

#: The audit log's name of an operator signed in to the console.
ACTOR_PREFIX = ACTOR_PREFIXES["operator"]
NAME_MAX = 100
#: Operators, their sessions and their throttle keys (the dashboard's limits, keys of their own).
OPERATORS = People("operator-", store.operator_by_email, store.set_password, store.rehash, store.insert_session,
                   store.live_session, store.touch_session, store.revoke_session, store.revoke_sessions_of,
                   store.operator_by_id, two_factor.OPERATORS)


@attrs.frozen
class ConsoleSettings(SessionSettings):
    idle_seconds: int = 3600
    lifetime_seconds: int = 12 * 3600
    link_seconds: int = 86400


def actor_of(email: str) -> str:
    return ACTOR_PREFIX + email


class Console(PasswordSignIn):
    def __init__(self, clock, db: Database, link_key: bytes, csrf_key: bytes, throttle: Throttle,
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
                 settings: ConsoleSettings = ConsoleSettings(), hasher: argon2.PasswordHasher | None = None,
                 vault: KeyVault | None = None, issuer: str = "mailsvc console"):
        super().__init__(clock, db, OPERATORS, link_key, csrf_key, settings, throttle, run_blocking, hasher, vault,
                         issuer)

    # Accounts and their set-password links

    async def create(self, body: dict, audit: Entry | None = None) -> tuple[dict, str]:
        """
        A new operator without a password, and its set-password token; 409 when the address has
        one. ``audit``'s entry (the link, which can take over the account) is written with it.
        """
        email = user_address(body.get("email"))
        name = body.get("name", email)
        if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
            raise Invalid("name", f"name must be a non-empty string of at most {NAME_MAX} characters")

        async def insert(txn: Transaction) -> dict:
            row = await store.insert_operator(txn, uuid7(self._clock.seconds()), email, name.strip(), self._now())
            if row is None:
                raise Conflict("email: an operator with this address already exists")
            if audit is not None:
                await audit.write_in(txn, operator_id=str(row["id"]), email=row["email"])
            return row

        row = await self._db.run("create_operator", insert)
        return row, self.password_token(row)

    async def link(self, body: dict) -> tuple[dict, str]:
        """A new set-password token for an existing operator (a forgotten password)."""
        row = await self.operator(user_address(body.get("email")))
        return row, self.password_token(row)

    async def operator(self, email: str) -> dict:
        row = await store.operator_by_email(self._db, email)
        if row is None:
            raise NotFound("Operator")
        return row

    async def set_password(self, body: dict) -> SignedIn | Challenge:
        """Set a password with a link's ``token``: every session of the operator ends, a new one begins."""
        password = new_password(body.get("password"))
        operator_id, version = self.link_target(body.get("token"))
        return await self.store_password(operator_id, version, password)

    async def authenticate(self, token: str) -> str | None:
        """The operator's e-mail address a console cookie stands for; None when unknown, expired, idle or revoked."""
        row = await self.live_session(token)
        return row["email"] if row is not None else None

    async def operator_id(self, email: str | None):
        return (await self.operator(email or ""))["id"]
