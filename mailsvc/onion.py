"""
The optional onion service (``tor.onion``): the node's HTTP API published as a v3 onion service
through a system ``tor``, reached on its control port or socket with txtorcon. ``ADD_ONION``
with ``Flags=Detach`` and a key kept in ``<state.dir>/onion-key`` (0600) keep the address across
restarts; a clean stop sends ``DEL_ONION``, and a lost control connection republishes with
backoff. Commands go over the control protocol rather than txtorcon's onion helpers, which
wait for a descriptor upload (never offline) that says nothing of whether tor took the service.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from twisted.internet import defer, task
from twisted.logger import Logger

log = Logger()

KEY_FILE = "onion-key"
#: Seconds between attempts to reach tor (doubling up to the last).
RETRY_SECONDS = (2, 4, 8, 15, 30, 60)


class OnionError(Exception):
    """tor refused or answered something unexpected."""


def read_key(path: Path) -> str | None:
    """The stored key (``ED25519-V3:<base64>``), or None before the first publication."""
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        return None
    if not key.startswith("ED25519-V3:") or any(c in key for c in " \r\n"):
        raise OnionError(f"{path}: not an ED25519-V3 key written by mailsvc")
    return key


def write_key(path: Path, key: str) -> None:
    """Write the key where only its owner reads it (created 0600, replaced atomically)."""
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    os.replace(partial, path)


def _reply_fields(reply: str) -> dict[str, str]:
    """``KEY=value`` lines of a control-port reply (txtorcon strips the ``250-`` prefixes)."""
    fields = {}
    for line in reply.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            fields[key] = value
    return fields


def port_target(host: str, port: int) -> str:
    """Where tor forwards the onion's connections: the HTTP listener, on loopback when it
    listens on every address."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class OnionService:
    """
    Publishes one onion service mapping ``virtual_port`` to ``target`` (``host:port``).
    ``connect()`` returns a Deferred firing with an authenticated txtorcon control protocol;
    ``published(address)`` is told the address (``<56 chars>.onion``) each time it is added.
    """

    def __init__(self, clock, connect: Callable[[], defer.Deferred], key_path: Path, virtual_port: int,
                 target: str, published: Callable[[str], None]):
        self._clock = clock
        self._connect = connect
        self._key_path = Path(key_path)
        self._virtual_port = virtual_port
        self._target = target
        self._published = published
        self._protocol = None
        self._service_id: str | None = None
        self._stopping = False
        self._retry: defer.Deferred | None = None
        self.address: str | None = None

    async def start(self) -> None:
        """Publish now; if tor cannot be reached or refuses, log why and keep trying in the
        background (the node serves meanwhile; ``address`` stays None until published)."""
        try:
            await self._publish()
        except Exception as e:
            log.error("onion service not published ({reason}); trying again", reason=_reason(e))
            self._again(0)

    async def _publish(self) -> None:
        protocol = await self._connect()
        try:
            key = read_key(self._key_path)
            service_id = await self._add(protocol, key)
        except BaseException:
            protocol.transport.loseConnection()
            raise
        self._protocol = protocol
        self._service_id = service_id
        self.address = f"{service_id}.onion"
        self._published(self.address)
        log.info("onion service {address} (port {port} to {target})", address=self.address,
                 port=self._virtual_port, target=self._target)
        protocol.when_disconnected().addBoth(self._disconnected)

    async def _add(self, protocol, key: str | None) -> str:
        port = f"Port={self._virtual_port},{self._target}"
        if key is None:
            fields = _reply_fields(await protocol.queue_command(f"ADD_ONION NEW:ED25519-V3 Flags=Detach {port}"))
            if not fields.get("PrivateKey", "").startswith("ED25519-V3:") or "ServiceID" not in fields:
                raise OnionError("ADD_ONION answered without a service id and an ED25519-V3 key")
            write_key(self._key_path, fields["PrivateKey"])
            return fields["ServiceID"]
        # One left behind by an earlier run of this node that did not stop cleanly (detached
        # services outlive their control connection) is replaced: its target may differ.
        service_id = onion_address(key).removesuffix(".onion")
        if service_id in await _detached(protocol):
            await protocol.queue_command(f"DEL_ONION {service_id}")
        reply = await protocol.queue_command(f"ADD_ONION {key} Flags=Detach {port}")
        fields = _reply_fields(reply)
        if "ServiceID" not in fields:
            raise OnionError("ADD_ONION answered without a service id")
        return fields["ServiceID"]

    def _disconnected(self, _reason) -> None:
        self._protocol = None
        if self._stopping:
            return
        log.warn("lost tor's control connection; publishing the onion service again")
        self._again(0)

    def _again(self, attempt: int) -> None:
        delay = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]

        async def retry():
            try:
                await self._publish()
            except Exception as e:
                if not self._stopping:
                    log.warn("onion service not published ({reason}); trying again in {seconds} s",
                             reason=_reason(e), seconds=RETRY_SECONDS[min(attempt + 1, len(RETRY_SECONDS) - 1)])
                    self._again(attempt + 1)

        self._retry = task.deferLater(self._clock, delay, lambda: defer.ensureDeferred(retry()))
        self._retry.addErrback(lambda f: f.trap(defer.CancelledError))

    async def stop(self) -> None:
        """Remove the service from tor (it keeps the key file) and close the connection."""
        self._stopping = True
        if self._retry is not None and not self._retry.called:
            self._retry.cancel()
        protocol, self._protocol = self._protocol, None
        if protocol is None:
            return
        try:
            if self._service_id is not None:
                await protocol.queue_command(f"DEL_ONION {self._service_id}")
        except Exception as e:
            log.warn("could not remove the onion service ({reason})", reason=_reason(e))
        finally:
            protocol.transport.loseConnection()


async def _detached(protocol) -> list[str]:
    """The service ids of ``GETINFO onions/detached`` (tor answers 551 when there is none)."""
    try:
        reply = await protocol.queue_command("GETINFO onions/detached")
    except Exception as e:
        if "551" in str(e) or "no onion services" in str(e).lower():
            return []
        raise
    ids = []
    for line in reply.splitlines():
        line = line.strip()
        if line.startswith("onions/detached="):
            line = line.partition("=")[2]
        if line and line != "OK":
            ids.append(line)
    return ids


def onion_address(key: str) -> str:
    """
    The v3 address of an ``ED25519-V3:<base64>`` key as tor stores it (the 64-byte expanded
    secret key, whose first half is the clamped scalar): base32(pubkey | checksum | version),
    rend-spec-v3 section 6.
    """
    import base64
    import hashlib

    from nacl.bindings import crypto_scalarmult_ed25519_base_noclamp

    expanded = base64.b64decode(key.removeprefix("ED25519-V3:"))
    if len(expanded) != 64:
        raise OnionError("an ED25519-V3 key is 64 bytes")
    public = crypto_scalarmult_ed25519_base_noclamp(expanded[:32])
    version = b"\x03"
    checksum = hashlib.sha3_256(b".onion checksum" + public + version).digest()[:2]
    return base64.b32encode(public + checksum + version).decode("ascii").lower() + ".onion"


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
