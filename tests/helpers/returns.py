"""The return-path listener of a node (the ``port`` fixture), a message delivered to it, and the samples."""

import smtplib
from pathlib import Path

import pytest_twisted as pt
from twisted.internet import reactor, threads

from mailsvc.smtp import inbound

SAMPLES = Path(__file__).parent.parent / "samples"
RETURN_HOST = "bounces.acme.example.com"


@pt.async_yield_fixture
async def port(mta):
    """The return-path listener of ``mta``, on loopback."""
    factory = inbound.InboundFactory(reactor, "mta.mailsvc.test", mta.parts.return_path.accepts,
                                     mta.parts.return_path.deliver)
    listening = await inbound.listen(reactor, "tcp:0:interface=127.0.0.1", factory)
    yield listening
    await listening.stopListening()


async def submit(port, sender: str, recipients: list[str], message: bytes):
    def run():
        with smtplib.SMTP("127.0.0.1", port.getHost().port, timeout=10) as client:
            return client.sendmail(sender, recipients, message)

    return await threads.deferToThread(run)


async def delivered(mta, key, to: list[str]):
    mta.route("example.net")
    email_id = await mta.send(key, to)
    await mta.sink.wait_for(1)
    await mta.settled()
    return email_id, mta.sink.messages[-1].mail_from


def sample(name: str, **replacements: str) -> bytes:
    text = (SAMPLES / name).read_text()
    for old, new in replacements.items():
        text = text.replace(old, new)
    return text.encode()
