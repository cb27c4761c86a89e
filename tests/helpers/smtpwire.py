"""Bytes in, bytes out for the SMTP server protocols: a StringTransport that records STARTTLS."""

from twisted.internet.testing import StringTransport


class TLSStringTransport(StringTransport):
    """Records STARTTLS instead of negotiating (the real TLS path is tested with smtplib)."""

    tls = None

    def startTLS(self, options):  # noqa: N802
        self.tls = options


def connected(factory):
    """A protocol from ``factory``, connected to a fresh transport; both are returned."""
    proto = factory.buildProtocol(None)
    transport = TLSStringTransport()
    proto.makeConnection(transport)
    return proto, transport


def send(proto, transport, data: bytes) -> list[bytes]:
    """Feeds ``data`` and answers the reply lines it caused, without their CRLF."""
    transport.clear()
    proto.dataReceived(data)
    return transport.value().split(b"\r\n")[:-1]
