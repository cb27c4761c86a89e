"""The real daemon under twistd in the foreground (``twistd``), a free loopback port, and waiting until it answers."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.helpers.polling import until
from tests.helpers.scratch import scratch_dir

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def twistd(state: Path, port: int, *options: str, new_session: bool = False, default_sigint: bool = False,
           **env) -> subprocess.Popen:
    """
    A node in the foreground. With ``default_sigint`` its SIGINT has the default disposition even
    when the test run inherited it ignored (``scripts/test &`` from a script): exec keeps an
    ignored signal ignored, and Python and Twisted then never handle it.
    """
    environ = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        MAILSVC_STATE_DIR=str(state),
        MAILSVC_HTTP_LISTEN=f"tcp:{port}:interface=127.0.0.1",
        MAILSVC_SMTP_SUBMISSION="",
        MAILSVC_SMTP_INBOUND="tcp:0:interface=127.0.0.1",
    )
    environ.update(env)  # a test's own settings win over these defaults
    command = [str(Path(sys.executable).parent / "twistd"), "--nodaemon", "--pidfile=", *options, "mailsvc"]
    if default_sigint:
        command = [sys.executable, "-c", _EXEC_WITH_DEFAULT_SIGINT, *command]
    return subprocess.Popen(
        command,
        env=environ, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=new_session,
    )


_EXEC_WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)


@pytest.fixture
def state():
    path = scratch_dir("mailsvc-daemon-")
    yield path / "state"
    shutil.rmtree(path, ignore_errors=True)


def wait_until_listening(url: str, process: subprocess.Popen, seconds: float = 60) -> None:
    """Until the node answers ``/healthz``; fails at once if it exits meanwhile."""
    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"daemon exited: {process.communicate()}")
        try:
            requests.get(url + "/healthz", timeout=1)
            return True
        except (requests.ConnectionError, requests.Timeout):
            return False  # refused before the socket is open; waiting in its queue while workers start

    until(answers, seconds, f"the daemon answering {url}/healthz")


def serving_pid(server_port: int, client_port: int, pids: set[int]) -> int | None:
    """The process holding the server side of the loopback connection from ``client_port`` (or,
    the ports the other way round, the client side)."""
    wanted = f":{server_port:04X}", f":{client_port:04X}"
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(wanted[0]) and fields[2].endswith(wanted[1]):
            inode = fields[9]
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None
