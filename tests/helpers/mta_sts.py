"""An MTA-STS policy served over HTTPS to a node, and the ``sts`` fixture that wires it."""

import pytest_twisted as pt

from tests.helpers.outside import HttpsReceiver, Reply

DOMAIN = "sts.example.org"
MX = f"mx.{DOMAIN}"


def policy(mode: str = "enforce", mx: str = MX, max_age: int = 86400) -> bytes:
    return f"version: STSv1\r\nmode: {mode}\r\nmx: {mx}\r\nmax_age: {max_age}\r\n".encode()


@pt.async_yield_fixture
async def sts(ca, start_mta_with, tmp_path, dns_server):
    server = HttpsReceiver(ca, f"mta-sts.{DOMAIN}")
    mta = await start_mta_with(
        MAILSVC_SECURITY_CA_FILE=ca.write(tmp_path / "ca.pem"),
        MAILSVC_SECURITY_TEST_MTA_STS_PORT=str(server.number),
    )
    mta.route(DOMAIN)
    dns_server.a(f"mta-sts.{DOMAIN}", "127.0.0.1")
    mta.policy_server = server
    yield mta
    await server.stop()


def serve(mta, body: bytes, record_id: str = "one1") -> None:
    mta.dns.remove(f"_mta-sts.{DOMAIN}")
    mta.dns.txt(f"_mta-sts.{DOMAIN}", f"v=STSv1; id={record_id};")
    mta.policy_server.receiver.default = Reply(200, {"Content-Type": "text/plain"}, body)
