"""
A fresh install's first account and user (``dashboard.first_user``), made once by the process
that starts the node, and what that process says of the node once it is up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from twisted.logger import Logger

from mailsvc import __version__
from mailsvc.app.dashboard import Dashboard, FirstOwner, first_owner
from mailsvc.config import Config
from mailsvc.crypto import credentials
from mailsvc.domain.domains import unpublishable_reason
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.dashboard.auth import set_password_link
from mailsvc.store.database import Database

log = Logger()

#: The name of a development start's first key (``<state dir>/api-key``), to find and revoke it by.
FIRST_KEY_NAME = "first key (scripts/serve)"


def keeps_first_key(config: Config) -> bool:
    """A development start (``dashboard.first_key_file``, set by scripts/serve) on the embedded store."""
    return config.dashboard.first_key_file and not config.database.dsn


async def first_account(config: Config, dashboard: Dashboard, db: Database,
                        create_tenant: Callable[..., Awaitable]) -> tuple[FirstOwner | None, Path | None]:
    """
    A fresh install's first account and user (``dashboard.first_user``); on a development start,
    the file that keeps the account's first key (written when the account is made, never again).
    """
    keeps_key = keeps_first_key(config)
    first = await first_owner(dashboard, db, config.dashboard.first_user, create_tenant,
                              key_name=FIRST_KEY_NAME if keeps_key else "Default")
    if first is None or not keeps_key:
        return first, None
    if first.api_key is not None:
        credentials.write_account_key(config.state_dir, first.api_key)
    key_path = config.state_dir / credentials.ACCOUNT_KEY_FILE
    return first, key_path if key_path.exists() else None


def announce_node(config: Config, processes_text: str, token_path: Path | None, first: FirstOwner | None,
                  key_path: Path | None, port: int | None) -> None:
    """
    What the node is, said once by the process that started it (its workers say none of it), and
    last what a newcomer needs: the operator token's file, the set-password link of a fresh
    install's first user and the file of its account's first key (scripts/serve shows them).
    """
    store = f"embedded PostgreSQL in {config.state_dir / 'postgresql'}" if not config.database.dsn \
        else "PostgreSQL at database.dsn"
    log.info("mailsvc {version}: roles {roles}; {processes}; store: {store}; mail hostname {hostname}",
             version=__version__, roles=", ".join(config.node.roles), processes=processes_text, store=store,
             hostname=config.hostname)
    reason = unpublishable_reason(config.hostname)
    if reason is not None:
        log.warn("{reason}", reason=reason)
    if token_path is not None:
        log.info("operator token is in {path}", path=token_path)
    if first is not None and first.password_token is not None and port is not None:
        base = PublicUrl(config.http.public_url).or_else(f"http://127.0.0.1:{port}")
        log.info("dashboard: {email} sets a password at {link}", email=first.user["email"],
                 link=set_password_link(base, first.password_token))
    if key_path is not None:
        log.info('API key of the first account ("{name}", revocable) is in {path}', name=FIRST_KEY_NAME,
                 path=str(key_path))
