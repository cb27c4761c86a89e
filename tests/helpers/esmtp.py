"""
The outbound SMTP client's peers in tests: Twisted's stock ESMTP server recording what it is
given (in memory through iosim, or on loopback), and the clean-up that ends every client a
test opened.
"""

import pytest
from twisted.internet import defer
from twisted.mail import smtp
from zope.interface import implementer

from mailsvc.smtp.outbound import OutboundSMTP


@pytest.fixture(autouse=True)
def close_connections():
    """Every connection ends with connectionLost, as a real one does (no suspended sessions)."""
    yield
    while opened:
        client = opened.pop()
        if client.is_open:
            client.connectionLost(None)


opened: list[OutboundSMTP] = []


@implementer(smtp.IMessage)
class StoredMessage:
    def __init__(self, store, sender, recipient):
        self.store, self.sender, self.recipient, self.lines = store, sender, recipient, []

    def lineReceived(self, line):  # noqa: N802
        self.lines.append(line)

    def eomReceived(self):  # noqa: N802
        self.store.append((self.sender, self.recipient, b"\r\n".join(self.lines) + b"\r\n"))
        return defer.succeed(None)

    def connectionLost(self):  # noqa: N802
        pass


@implementer(smtp.IMessageDelivery)
class RecordingDelivery:
    def __init__(self):
        self.messages = []

    def receivedHeader(self, helo, origin, recipients):  # noqa: N802
        return None

    def validateFrom(self, helo, origin):  # noqa: N802
        return origin

    def validateTo(self, user):  # noqa: N802
        if user.dest.local.startswith(b"nobody"):
            raise smtp.SMTPBadRcpt(user)
        return lambda: StoredMessage(self.messages, str(user.orig), str(user.dest))


class PipeliningESMTP(smtp.ESMTP):
    """The stock server answers in order with synchronous validators, so PIPELINING is safe."""

    def extensions(self):
        return {**super().extensions(), b"PIPELINING": None, b"SIZE": [b"10000000"]}
