"""
The server's own secrets: the master key (from which the API-key HMAC key and, later, the
at-rest encryption keys are derived) and the operator token. Either comes from the
configuration or is generated once into the state directory with mode 0600. A development
start also keeps its first account's first API key there (``api-key``).
"""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mailsvc.crypto.keyvault import KeyVault

#: Where a development start keeps its first account's first key (compose.keeps_first_key).
ACCOUNT_KEY_FILE = "api-key"


def _read_or_create(path: Path, make) -> str:
    try:
        return path.read_text("ascii").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = make()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(value + "\n")
    return value


def master_key(configured: str, state_dir: Path) -> bytes:
    """32 bytes; configured as base64 (every node of one database must share it)."""
    text = configured or _read_or_create(
        state_dir / "master-key", lambda: base64.b64encode(secrets.token_bytes(32)).decode()
    )
    return _decoded(text, "security.master_key")


def old_master_keys(configured: tuple[str, ...]) -> tuple[bytes, ...]:
    """Master keys replaced by a rotation: secrets sealed under them still open (nothing is
    sealed under them any more)."""
    return tuple(_decoded(text, "security.old_master_keys") for text in configured)


def _decoded(text: str, setting: str) -> bytes:
    try:
        key = base64.b64decode(text, validate=True)
    except ValueError:
        raise ValueError(f"{setting}: not valid base64") from None
    if len(key) < 32:
        raise ValueError(f"{setting}: must hold at least 32 bytes")
    return key


def derive(master: bytes, purpose: str) -> bytes:
    """An independent 32-byte key for one purpose (HKDF-SHA256)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode()).derive(master)


def vault(master: bytes, old_masters: tuple[bytes, ...], purpose: str) -> KeyVault:
    """The vault of one purpose: sealing under the master key, opening under it or an old one."""
    return KeyVault(derive(master, purpose), [derive(old, purpose) for old in old_masters])


def operator_token(configured: str, state_dir: Path) -> tuple[str, Path | None]:
    """The operator token and the file it is kept in (None when it came from the config)."""
    if configured:
        return configured, None
    path = state_dir / "operator-token"
    return _read_or_create(path, lambda: "op_" + secrets.token_urlsafe(32)), path


def write_account_key(state_dir: Path, token: str) -> Path:
    """
    ``<state dir>/api-key`` (0600) holding ``token``: written when the first account is made,
    replacing the key of an earlier database (never the key of this one: it is not made again).
    """
    path = state_dir / ACCOUNT_KEY_FILE
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
    os.replace(partial, path)
    return path
