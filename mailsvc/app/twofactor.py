"""
Two-factor sign-in (docs/operations.md, "Security"): a TOTP secret (RFC 6238) per person,
enrolled in two steps (a secret shown, then confirmed with a code of it) and sealed at rest
like the project's other secrets; ten one-time recovery codes shown once and kept as digests;
every code checked throttled per person and per client network in the shared failure throttle,
and a code accepted once only (the step it matched is kept, and no code of that step or an
earlier one is taken again).
"""

from __future__ import annotations

import secrets
import uuid

from cryptography.exceptions import InvalidTag

from mailsvc import timefmt
from mailsvc.app.throttle import Limit, Throttle
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.domain import totp
from mailsvc.domain.errors import Conflict, Invalid, NotFound, RateLimited
from mailsvc.store import two_factor as store
from mailsvc.store.database import Database

#: Wrong codes: a person gets 5 tries, then one a minute; a client network 20, then one every 15 s.
PERSON_LIMIT = Limit(5, 60.0)
CLIENT_LIMIT = Limit(20, 15.0)
WRONG_CODE = "The code is wrong, or was used already."


class TwoFactor:
    def __init__(self, clock, db: Database, vault: KeyVault, tables: store.Tables, issuer: str, throttle: Throttle,
                 throttle_prefix: str):
        self._clock = clock
        self._db = db
        self._vault = vault
        self._tables = tables
        self._issuer = issuer
        self._throttle = throttle
        self._prefix = throttle_prefix

    def _bound(self, person_id: uuid.UUID) -> bytes:
        return f"{self._tables.people}.totp:".encode() + person_id.bytes

    async def _state(self, person_id: uuid.UUID) -> dict:
        row = await store.state(self._db, self._tables, person_id)
        if row is None:
            raise NotFound("User")
        return row

    async def status(self, person_id: uuid.UUID) -> dict:
        row = await self._state(person_id)
        return {"object": "two_factor", "enabled": row["totp_enabled_at"] is not None,
                "enabled_at": timefmt.resource(row["totp_enabled_at"]) if row["totp_enabled_at"] else None,
                "recovery_codes_left": row["recovery_left"]}

    async def begin(self, person_id: uuid.UUID) -> dict:
        """A new secret to enrol (replacing one begun before): as text to type and as an ``otpauth://`` URI."""
        row = await self._state(person_id)
        secret = secrets.token_bytes(totp.SECRET_BYTES)
        sealed = self._vault.seal(secret, self._bound(person_id))
        if not await store.set_pending(self._db, self._tables, person_id, sealed):
            raise Conflict("Two-factor sign-in is on already; turn it off first to enrol another device.")
        return {"object": "two_factor_enrolment", "secret": totp.base32(secret),
                "otpauth_uri": totp.provisioning_uri(secret, row["email"], self._issuer),
                "digits": totp.DIGITS, "period": totp.STEP_SECONDS, "algorithm": "SHA1"}

    async def confirm(self, person_id: uuid.UUID, code: object, client: str) -> list[str]:
        """Turn two-factor sign-in on with a code of the secret begun: the recovery codes, shown this once."""
        row = await self._state(person_id)
        if row["totp_secret"] is not None:
            raise Conflict("Two-factor sign-in is on already.")
        if row["totp_pending"] is None:
            raise Invalid("code", "begin an enrolment first")
        limits = self._limits(person_id, client)
        await self._reserve(limits)
        secret = self._vault.open(row["totp_pending"], self._bound(person_id))
        step = totp.matching_step(secret, code, self._clock.seconds())
        if step is None:
            raise Invalid("code", WRONG_CODE)
        await self._throttle.give_back(limits)
        codes = [totp.recovery_code(secrets.token_bytes(8)) for _ in range(totp.RECOVERY_CODES)]
        digests = []
        for code_given in codes:
            digest = totp.recovery_digest(person_id, code_given)
            assert digest is not None  # recovery_code made it
            digests.append(digest)
        now = timefmt.from_seconds(self._clock.seconds())
        if not await store.enable(self._db, self._tables, person_id, bytes(row["totp_pending"]), step, digests, now):
            raise Conflict("The enrolment changed meanwhile; begin again.")
        return codes

    async def disable(self, person_id: uuid.UUID) -> None:
        await store.disable(self._db, self._tables, person_id)

    def _limits(self, person_id: uuid.UUID, client: str) -> dict[str, Limit]:
        return {f"{self._prefix}2fa:{person_id}": PERSON_LIMIT, f"{self._prefix}2fa-client:{client}": CLIENT_LIMIT}

    async def _reserve(self, limits: dict[str, Limit]) -> None:
        wait = await self._throttle.reserve(limits)
        if wait is not None:
            raise RateLimited("Too many wrong codes; try again later.", wait)

    async def check(self, person_id: uuid.UUID, client: str, code: object = None, recovery_code: object = None) -> bool:
        """
        Whether ``code`` (a TOTP code) or ``recovery_code`` is right for the person, using it up:
        counted as a failure before it is checked (``RateLimited`` past the limits), given back
        when right.
        """
        limits = self._limits(person_id, client)
        await self._reserve(limits)
        ok = False
        row = await store.state(self._db, self._tables, person_id)
        if row is not None and row["totp_secret"] is not None:
            if recovery_code is not None:
                digest = totp.recovery_digest(person_id, recovery_code)
                ok = digest is not None and await store.use_recovery_code(
                    self._db, self._tables, person_id, digest) is not None
            else:
                try:
                    secret = self._vault.open(row["totp_secret"], self._bound(person_id))
                except InvalidTag:
                    secret = None
                step = totp.matching_step(secret, code, self._clock.seconds()) if secret is not None else None
                ok = step is not None and await store.use_step(self._db, self._tables, person_id, step)
        if ok:
            await self._throttle.give_back(limits)
        return ok
