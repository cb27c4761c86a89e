"""
Postfix's smtp-sink as the receiving MTA (a process of its own, as user nobody): every message
of a load of 300 arrives once, signed. The MTA against the tests' own sink:
tests/integration/test_delivery.py.
"""

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
import pytest_twisted as pt

from tests.helpers.polling import async_until


@pytest.mark.slow
@pt.ensureDeferred
async def test_a_load_to_postfix_smtp_sink(start_mta_with):
    """Postfix's smtp-sink as the receiving MTA: every message of a load arrives once."""
    dump = Path(tempfile.mkdtemp(prefix="mailsvc-smtp-sink-"))  # in /tmp: reachable by nobody
    os.chown(dump, *_nobody())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = subprocess.Popen(["/usr/sbin/smtp-sink", "-u", "nobody", "-d", f"{dump}/m", f"127.0.0.1:{port}", "64"])
    try:
        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        await async_until(listening, 10, "Postfix's smtp-sink listening")
        mta = await start_mta_with(MAILSVC_DELIVERY_PORT=str(port), MAILSVC_DELIVERY_PER_DESTINATION="4")
        mta.route("example.net")
        _, key = await mta.sender()
        for batch in range(3):
            code, sent, _ = await mta.json("POST", "/emails/batch", key, json=[
                {"from": "Acme <news@acme.example.com>", "to": [f"u{batch}-{i}@example.net"],
                 "subject": f"load {batch}-{i}", "text": "." + "line\n" * 50} for i in range(100)])
            assert code == 200, sent
        async def all_delivered() -> bool:
            row = await mta.parts.db.fetchone("SELECT count(*) AS n FROM deliveries WHERE status = 'delivered'")
            return row["n"] == 300

        async def outcomes() -> str:
            return "the load's 300 deliveries delivered: " + str(await mta.parts.db.fetchall(
                "SELECT status, last_response, count(*) FROM deliveries GROUP BY 1, 2"))

        await async_until(all_delivered, 30, outcomes)
        files = list(dump.iterdir())
        assert len(files) == 300
        assert all(b"DKIM-Signature:" in f.read_bytes() for f in files[:5])
    finally:
        sink.terminate()
        sink.wait(10)
        shutil.rmtree(dump)


def _nobody() -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid
