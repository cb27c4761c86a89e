"""Accounts made as the API makes them, for tests that need a tenant but no assembled application."""

from mailsvc.app.accounts import Accounts
from mailsvc.app.apikeys import KeyRing
from mailsvc.app.throttle import Throttle


def accounts_for(clock, db, keyring: KeyRing | None = None) -> Accounts:
    """The accounts use case on ``db`` with a key ring of its own (or ``keyring``), 10 requests a second."""
    return Accounts(clock, db, keyring or KeyRing(clock, db, b"k" * 32, "re", 10), 10, Throttle(clock, db))


async def new_tenant(clock, db, **fields):
    """A tenant named "t" unless ``fields`` say otherwise, with its first key."""
    tenant, _, _ = await accounts_for(clock, db).create_tenant({"name": "t", **fields})
    return tenant
