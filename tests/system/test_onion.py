"""
The optional onion service (``tor.onion``) on the real daemon and a real tor.

The test runs its own ``tor`` with networking disabled (``DisableNetwork 1``, no SOCKS port, a
control socket in a private temporary directory with cookie authentication), so nothing
outside the machine is reached and no descriptor is ever uploaded: what is checked is that
tor took the service, through the test's own control connection (``GETINFO
onions/detached``: the node's service is detached from its connection). The node runs as it
does by default on two cores (a parent and two workers): the service is published once, by
the first worker, and ``GET /admin/v1`` tells its address whichever worker answers.

Three starts on one state directory: the address is that of the key kept in it every time;
a clean stop removes the service from tor; a node killed outright leaves it behind, and the
next start replaces it (tor still lists it once).
"""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import requests
from nacl.bindings import crypto_scalarmult_ed25519_base_noclamp

from mailsvc.store.embedded import find_bindir
from tests.helpers.daemon import free_port, twistd, wait_until_listening
from tests.helpers.polling import until
from tests.helpers.scratch import scratch_dir

#: Three daemon starts on the embedded store (about 20 s).
pytestmark = pytest.mark.slow


class Tor:
    """A tor of the test's own: no network, no SOCKS port, a control socket in ``root``."""

    def __init__(self, root: Path):
        self.root = root
        self.control = root / "control" / "socket"
        (root / "control").mkdir(mode=0o700)
        (root / "data").mkdir(mode=0o700)
        torrc = root / "torrc"
        torrc.write_text("\n".join([
            f"DataDirectory {root / 'data'}",
            "DisableNetwork 1",
            "SocksPort 0",
            f"ControlSocket {self.control}",
            "CookieAuthentication 1",
            f"CookieAuthFile {root / 'control' / 'cookie'}",
            f"Log notice file {root / 'tor.log'}",
            "",
        ]))
        self.process = subprocess.Popen(
            ["tor", "--defaults-torrc", "/dev/null", "-f", str(torrc)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

        def control_open() -> bool:
            assert self.process.poll() is None, (root / "tor.log").read_text()
            return self.control.exists()

        until(control_open, 30, "tor's control socket", interval=0.05)

    def getinfo(self, key: str) -> tuple[str, list[str]]:
        """``GETINFO key`` on a connection of its own: the status code and the values."""
        cookie = (self.root / "control" / "cookie").read_bytes().hex()
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(str(self.control))
            f = s.makefile("rwb")
            f.write(f"AUTHENTICATE {cookie}\r\nGETINFO {key}\r\nQUIT\r\n".encode())
            f.flush()
            assert f.readline().startswith(b"250"), "tor refused the cookie"
            values: list[str] = []
            while True:
                line = f.readline().decode().rstrip("\r\n")
                code, more, rest = line[:3], line[3:4], line[4:]
                if more == "+":  # a data reply: lines up to "."
                    while (data := f.readline().decode().rstrip("\r\n")) != ".":
                        values.append(data)
                elif more == "-":
                    values.append(rest.partition("=")[2])
                elif code != "250" or not values:
                    return code, values
                else:
                    return code, [v for v in values if v]

    def detached(self) -> list[str]:
        code, values = self.getinfo("onions/detached")
        return values if code == "250" else []  # 551: none

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def v3_address(stored_key: str) -> str:
    """The address of tor's ED25519-V3 key (the expanded secret key; its first half is the
    clamped scalar), computed here independently of mailsvc (rend-spec-v3, section 6)."""
    expanded = base64.b64decode(stored_key.removeprefix("ED25519-V3:"))
    public = crypto_scalarmult_ed25519_base_noclamp(expanded[:32])
    checksum = hashlib.sha3_256(b".onion checksum" + public + b"\x03").digest()[:2]
    return base64.b32encode(public + checksum + b"\x03").decode().lower() + ".onion"


def node_pids(process: subprocess.Popen) -> list[int]:
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    return [process.pid, *map(int, children)]


def admin_onion(url: str, token: str, process: subprocess.Popen, seconds: float = 20) -> list[str | None]:
    """``onion`` of ``GET /admin/v1`` over several requests (they reach both workers), once
    every one of them tells an address."""
    def seen() -> list[str | None]:
        assert process.poll() is None, process.communicate()
        return [requests.get(url + "/admin/v1", headers={"Authorization": f"Bearer {token}"},
                             timeout=10).json()["onion"] for _ in range(8)]

    return until(lambda: None not in (answers := seen()) and answers, seconds,
                 lambda: f"every worker telling its onion address: {seen()}", interval=0.3)


def test_the_api_is_published_as_an_onion_service_with_a_stable_address():
    root = scratch_dir("mailsvc-onion-")
    state = root / "state"
    tor_root = root / "tor"
    tor_root.mkdir(mode=0o700)
    tor = Tor(tor_root)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(MAILSVC_NODE_PROCESSES="2", MAILSVC_TOR_ONION="true", MAILSVC_TOR_CONTROL=f"unix:{tor.control}",
               MAILSVC_TOR_PORT="80")
    daemon = None
    passed = False
    try:
        addresses = []
        for start in range(3):
            daemon = twistd(state, port, **env)
            wait_until_listening(url, daemon)
            token = (state / "operator-token").read_text().strip()
            seen = admin_onion(url, token, daemon)
            key_file = state / "onion-key"
            assert oct(key_file.stat().st_mode & 0o777) == "0o600"
            expected = v3_address(key_file.read_text().strip())
            assert seen == [expected] * len(seen), (start, seen)
            # Registered with tor once, by the first worker, whatever an earlier run left.
            assert tor.detached() == [expected.removesuffix(".onion")], start
            addresses.append(expected)
            if start == 1:
                # Killed outright (every process of the node): the service stays in tor.
                daemon.send_signal(signal.SIGSTOP)
                for pid in node_pids(daemon):
                    os.kill(pid, signal.SIGKILL)
                output = daemon.communicate(timeout=30)
                assert tor.detached() == [expected.removesuffix(".onion")]
            else:
                daemon.send_signal(signal.SIGTERM)
                output = daemon.communicate(timeout=60)
                assert daemon.returncode in (0, -signal.SIGTERM), output
                # A clean stop removes it.
                assert tor.detached() == []
            assert f"onion service {expected}" in output[0] + output[1], output
        assert addresses == [addresses[0]] * 3
        # The virtual port is forwarded to the HTTP listener on loopback.
        assert f"port 80 to 127.0.0.1:{port}" in output[0] + output[1]
        passed = True
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.communicate()
        tor.stop()
        # The cluster of the killed run was reused by the third, which did not start it and
        # so left it running: stopped here, as its owner.
        data = state / "postgresql" / "data"
        if (data / "postmaster.pid").exists():
            owner = pwd.getpwnam("mailsvc") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
            subprocess.run([str(find_bindir() / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           user=owner.pw_uid, group=owner.pw_gid, extra_groups=[], capture_output=True, cwd="/")
        if passed:
            shutil.rmtree(root, ignore_errors=True)
