"""
The SSH manhole: a Python prompt inside the running node, for an operator on the machine.

It listens on loopback or a Unix socket only, lets in only the public keys listed in
``<state.dir>/manhole_authorized_keys`` (OpenSSH format, read again at every login, so a key
removed from the file is refused from the next login on), and presents a host key generated
once into ``<state.dir>/manhole_host_key``. No key ships with the code.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from twisted.conch import manhole, manhole_ssh
from twisted.conch.checkers import IAuthorizedKeysDB, SSHPublicKeyChecker, readAuthorizedKeyFile
from twisted.conch.insults import insults
from twisted.conch.ssh import keys
from twisted.cred import portal
from twisted.internet import defer, endpoints
from twisted.logger import Logger
from zope.interface import implementer

log = Logger()

AUTHORIZED_KEYS = "manhole_authorized_keys"
HOST_KEY = "manhole_host_key"


def _fields(description: str) -> list[str]:
    """An endpoint description split on its unescaped colons, as Twisted splits it."""
    fields, current, escaped = [], [], False
    for char in description:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ":":
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
    fields.append("".join(current))
    return fields


def check_endpoint(description: str) -> None:
    """
    Raise ValueError unless ``description`` listens on a loopback address or a Unix socket:
    the manhole runs arbitrary code, so it must never be reachable from another machine.
    """
    kind, *args = _fields(description)
    kind = kind.strip().lower()
    if kind == "unix":
        return
    if kind in ("tcp", "tcp6"):
        positional = [arg for arg in args if "=" not in arg]
        named = dict(arg.split("=", 1) for arg in args if "=" in arg)
        interface = named.get("interface", positional[1] if len(positional) > 1 else "")
        try:
            if ipaddress.ip_address(interface).is_loopback:
                return
        except ValueError:
            pass
        raise ValueError(
            f"manhole.listen: {description!r} is not on a loopback address "
            "(give interface=127.0.0.1 or ::1, or a unix: socket)"
        )
    raise ValueError(f"manhole.listen: {description!r} must be a tcp: endpoint on loopback or a unix: socket")


def host_key(path: Path) -> keys.Key:
    """The manhole's host key, generated (Ed25519, mode 0600) the first time."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        log.info("generated the manhole host key {path}", path=path)
    return keys.Key(serialization.load_ssh_private_key(data, password=None))


@implementer(IAuthorizedKeysDB)
class AuthorizedKeysFile:
    """
    The keys allowed in, for any user name, read from the file at each login. Like sshd's
    StrictModes, a file others may write to lets nobody in.
    """

    def __init__(self, path: Path):
        self.path = path

    def getAuthorizedKeys(self, username: bytes) -> Iterable[keys.Key]:  # noqa: N802 (Twisted's name)
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                    log.warn("ignoring {path}: group or others may write to it", path=self.path)
                    return []
                return list(readAuthorizedKeyFile(f))
        except FileNotFoundError:
            return []


def factory(namespace: dict, state_dir: Path) -> manhole_ssh.ConchFactory:
    """An SSH server factory whose sessions are a Python prompt over ``namespace``."""
    realm = manhole_ssh.TerminalRealm()
    # Twisted infers the class it defaults to as this attribute's type, yet calls any factory
    # (its own manhole service sets one like this).
    realm.chainedProtocolFactory = functools.partial(  # type: ignore[assignment]
        insults.ServerProtocol, manhole.ColoredManhole, namespace)
    checker = SSHPublicKeyChecker(AuthorizedKeysFile(state_dir / AUTHORIZED_KEYS))
    # TerminalRealm is a realm (requestAvatar) that Twisted does not declare as IRealm.
    ssh_factory = manhole_ssh.ConchFactory(portal.Portal(realm, [checker]))  # type: ignore[arg-type]
    key = host_key(state_dir / HOST_KEY)
    # Instance attributes: ConchFactory's class-level dicts would be shared by every factory.
    ssh_factory.publicKeys = {key.sshType(): key.public()}
    # Twisted types these as bytes, but SSHFactory reads Key objects from them (getPrivateKeys' docs).
    ssh_factory.privateKeys = {key.sshType(): key}  # type: ignore[dict-item]
    return ssh_factory


def namespace(**running) -> dict:
    """The prompt's names: the running parts, plus ``ensureDeferred`` to call async methods."""
    return {"ensureDeferred": defer.ensureDeferred, **running}


def describe(address) -> str:
    """``host:port`` of a TCP address, the path of a Unix one."""
    if hasattr(address, "port"):
        return f"[{address.host}]:{address.port}" if ":" in address.host else f"{address.host}:{address.port}"
    name = address.name
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)


async def listen(reactor, description: str, names: dict, state_dir: Path):
    """Listen on ``description`` (refused unless loopback or a Unix socket); the port."""
    check_endpoint(description)
    endpoint = endpoints.serverFromString(reactor, description)
    return await endpoint.listen(factory(names, state_dir))
