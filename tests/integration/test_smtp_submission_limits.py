"""
SMTP submission's bounds on loopback, as the settings set them (short ones here): connections at
once in all and per client address, the deadline of one command line, the length of a session.
"""

import socket
import time

import pytest
import pytest_twisted as pt
from twisted.internet import threads

from mailsvc.config import load
from tests.helpers.smtp import smtp_ports  # noqa: F401 (a fixture)


@pytest.fixture
def config():
    return load(None, environ={
        "MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS": "false",
        "MAILSVC_SMTP_SUBMISSION_MAX_CONNECTIONS": "3",
        "MAILSVC_SMTP_SUBMISSION_MAX_CONNECTIONS_PER_CLIENT": "2",
        "MAILSVC_SMTP_SUBMISSION_COMMAND_TIMEOUT": "1",
        "MAILSVC_SMTP_SUBMISSION_SESSION_TIMEOUT": "3",
    })


def opened(port: int, source: str = "127.0.0.1") -> tuple[socket.socket, bytes]:
    """A plain connection to the STARTTLS listener from ``source``, and its first reply line."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    return s, s.makefile("rb").readline()


def rest(s: socket.socket) -> bytes:
    """Everything the server says until it closes the connection."""
    chunks = []
    while chunk := s.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks)


@pt.ensureDeferred
async def test_connections_are_capped_in_all_and_per_client_address(api, smtp_ports):  # noqa: F811
    port = smtp_ports["starttls"]

    def scenario():
        kept = [opened(port)[0], opened(port)[0]]
        try:
            over_client, over_client_reply = opened(port)  # the address's third
            assert over_client_reply == b"421 4.7.0 Too many connections; try again later\r\n"
            assert rest(over_client) == b""
            other, greeting = opened(port, "127.0.0.2")
            kept.append(other)
            assert greeting.startswith(b"220 ")
            _, over_all_reply = opened(port, "127.0.0.3")  # connection 4 of 3
            assert over_all_reply.startswith(b"421 4.7.0 Too many connections")
        finally:
            for s in kept:
                s.close()

    await threads.deferToThread(scenario)


@pt.ensureDeferred
async def test_a_trickled_line_and_a_long_session_get_421(api, smtp_ports):  # noqa: F811
    port = smtp_ports["starttls"]

    def trickled():
        s, _ = opened(port)
        with s:
            started = time.monotonic()
            for byte in b"EHLO trickle.example":  # a byte every 0.1 s, the line never ending
                try:
                    s.sendall(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.1)
            said = rest(s)
            return said, time.monotonic() - started

    said, took = await threads.deferToThread(trickled)
    assert said == b"421 4.7.0 Command line too slow, closing connection\r\n" and took < 2.5

    def busy():
        s, _ = opened(port)
        with s:
            replies = s.makefile("rb")
            started = time.monotonic()
            while time.monotonic() - started < 5:
                s.sendall(b"NOOP\r\n")
                line = replies.readline()
                if not line.startswith(b"250 "):
                    return line, time.monotonic() - started
                time.sleep(0.3)
            return b"", 5.0

    said, took = await threads.deferToThread(busy)
    assert said == b"421 4.7.0 Session too long, closing connection\r\n" and 2.5 < took < 4
