"""
SpamAssassin's spamd on loopback for the spam score tests: Debian's package with its packaged
rules (never sa-update), network tests off (``--local``), one child, no user configuration;
started once per test run (it takes seconds to load its rules) and stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers.polling import until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def spamd():
    """The address (host:port) of a running spamd."""
    binary = shutil.which("spamd") or "/usr/sbin/spamd"
    if not Path(binary).exists():
        pytest.fail("spamd is not installed (scripts/setup.sh installs Debian's spamd with MAILSVC_TEST_DEPS=1)")
    port = _free_port()
    state = Path(tempfile.mkdtemp(prefix="mailsvc-spamd-"))
    command = [binary, f"--listen=127.0.0.1:{port}", "--local", "--max-children=1", "--min-children=1",
               "--nouser-config", f"--pidfile={state / 'pid'}", "--syslog=stderr"]
    if os.geteuid() == 0:
        command.append("--username=nobody")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(state / "log", "wb"))
    try:
        def listening() -> bool:
            if process.poll() is not None:
                pytest.fail(f"spamd exited: {(state / 'log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        until(listening, 60, lambda: f"spamd listening: {(state / 'log').read_text()[-2000:]}", interval=0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(state, ignore_errors=True)
