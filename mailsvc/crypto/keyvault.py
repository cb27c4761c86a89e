"""
Secrets at rest: AES-256-GCM under a key derived from the master key for one purpose. The
associated data binds a sealed value to the row it belongs to, so a ciphertext copied into
another row does not open.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12


class KeyVault:
    def __init__(self, key: bytes):
        self._aead = AESGCM(key)

    def seal(self, plaintext: bytes, bound_to: bytes) -> bytes:
        """``nonce || ciphertext`` of ``plaintext``, opening only with the same ``bound_to``."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, bound_to)

    def open(self, sealed: bytes, bound_to: bytes) -> bytes:
        """The plaintext; raises ``cryptography.exceptions.InvalidTag`` if anything differs."""
        sealed = bytes(sealed)
        return self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], bound_to)
