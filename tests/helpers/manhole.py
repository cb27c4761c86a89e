"""An SSH client's key for the manhole in tests."""

from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519


def client_key(directory: Path, name: str) -> tuple[paramiko.PKey, str]:
    """A fresh Ed25519 key for the SSH client and its authorized_keys line."""
    private = ed25519.Ed25519PrivateKey.generate()
    path = directory / name
    path.write_bytes(private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ))
    line = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return paramiko.Ed25519Key.from_private_key_file(str(path)), line.decode() + f" {name}\n"
