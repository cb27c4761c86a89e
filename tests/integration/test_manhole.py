"""
The SSH manhole: a real SSH client on loopback and on a unix socket, keys from the state
directory.
"""

import re
import socket
import tempfile
import time
from pathlib import Path

import paramiko
import pytest
import pytest_twisted as pt
from twisted.internet import reactor, threads

from mailsvc import manhole
from mailsvc import node as node_start
from mailsvc.config import load
from mailsvc.service import Node
from tests.helpers.manhole import client_key

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def evaluate(at: int | str, host_key: paramiko.PKey, key: paramiko.PKey, expression: str, expect: str) -> str:
    """
    Log in with ``key`` on a loopback port or a Unix socket path (blocking; run in a thread),
    type ``expression``, and wait for ``expect`` on the screen.
    """
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    if isinstance(at, int):
        host, port, sock = "127.0.0.1", at, None
        client.get_host_keys().add(f"[127.0.0.1]:{port}", host_key.get_name(), host_key)
    else:
        host, port, sock = "manhole", 22, socket.socket(socket.AF_UNIX)
        sock.connect(at)
        client.get_host_keys().add(host, host_key.get_name(), host_key)
    try:
        client.connect(host, port, username="operator", pkey=key, sock=sock, look_for_keys=False,
                       allow_agent=False, timeout=10, banner_timeout=10, auth_timeout=10)
        channel = client.invoke_shell(term="vt100", width=200)
        channel.settimeout(1)
        channel.send(expression + "\r")
        screen, deadline = "", time.monotonic() + 15
        while expect not in screen and time.monotonic() < deadline:
            try:
                screen += _ANSI.sub("", channel.recv(4096).decode("utf-8", "replace"))
            except TimeoutError:
                pass
        return screen
    finally:
        client.close()


@pt.ensureDeferred
async def test_listed_key_gets_a_prompt_in_the_running_node_and_others_are_refused(fresh_dsn, tmp_path):
    state = tmp_path / "state"
    config = load(None, environ={
        "MAILSVC_STATE_DIR": str(state),
        "MAILSVC_DATABASE_DSN": fresh_dsn,
        "MAILSVC_HTTP_LISTEN": "tcp:0:interface=127.0.0.1",
        "MAILSVC_MANHOLE_LISTEN": "tcp:0:interface=127.0.0.1",
        "MAILSVC_SMTP_SUBMISSION": "",  # not the default ports (465, 587, ...), which may be taken
        "MAILSVC_NODE_ROLES": "api",
    })
    failures = []
    node = Node(lambda node: node_start.start(reactor, config, node), failures.append)
    node.startService()
    try:
        await node.ready
        port = node.parts.manhole_address.port
        host_key_file = state / manhole.HOST_KEY
        assert oct(host_key_file.stat().st_mode & 0o777) == "0o600"
        host_key = paramiko.Ed25519Key.from_private_key_file(str(host_key_file))
        accounts = node.parts.assembled.accounts
        for name in ("A", "B"):
            await accounts.create_tenant({"name": name})

        listed, listed_line = client_key(tmp_path, "listed")
        stranger, stranger_line = client_key(tmp_path, "stranger")
        (state / manhole.AUTHORIZED_KEYS).write_text("# operators\n" + listed_line)

        count = 'ensureDeferred(db.fetchone("SELECT count(*) AS n FROM tenants"))'
        screen = await threads.deferToThread(
            evaluate, port, host_key, listed, count, "called back: {'n': 2}"
        )
        assert "called back: {'n': 2}" in screen
        screen = await threads.deferToThread(
            evaluate, port, host_key, listed, "parts.db is db and node.parts.assembled is parts", "True"
        )
        assert "True" in screen

        with pytest.raises(paramiko.AuthenticationException):
            await threads.deferToThread(evaluate, port, host_key, stranger, "1", "1")

        # The file is read at each login: a key added is let in, a key removed is refused.
        (state / manhole.AUTHORIZED_KEYS).write_text(stranger_line)
        screen = await threads.deferToThread(evaluate, port, host_key, stranger, "6 * 7", "42")
        assert "42" in screen
        with pytest.raises(paramiko.AuthenticationException):
            await threads.deferToThread(evaluate, port, host_key, listed, "1", "1")
    finally:
        await node.stopService()
    assert failures == []


@pt.ensureDeferred
async def test_manhole_on_a_unix_socket(tmp_path):
    directory = Path(tempfile.mkdtemp(prefix="mh-"))  # short: socket paths are limited to ~100 bytes
    path = str(directory / "manhole.sock")
    key, line = client_key(tmp_path, "operator")
    (tmp_path / manhole.AUTHORIZED_KEYS).write_text(line)
    port = await manhole.listen(reactor, f"unix:{path}:mode=600", manhole.namespace(answer=41), tmp_path)
    try:
        assert manhole.describe(port.getHost()) == path
        host_key = paramiko.Ed25519Key.from_private_key_file(str(tmp_path / manhole.HOST_KEY))
        screen = await threads.deferToThread(evaluate, path, host_key, key, "answer + 1", "42")
        assert "42" in screen
    finally:
        await port.stopListening()
        directory.rmdir()


