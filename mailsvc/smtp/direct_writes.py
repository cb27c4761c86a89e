"""
Writes straight to the socket (docs/decisions.md, "Outbound SMTP client"): on a plain TCP
connection a write is one ``send()`` on the socket (``ITCPTransport.getHandle``, public API)
while the transport holds nothing unsent, rather than on the reactor's next turn: no
``epoll_ctl`` pair and no reactor turn per write. No private attribute of Twisted is used.
"""

from __future__ import annotations

import socket

from twisted.internet.interfaces import ISSLTransport, ITCPTransport


class DirectWrites:
    """One connection's socket, written to while the transport has not been written to."""

    def __init__(self) -> None:
        self._socket: socket.socket | None = None

    def open(self, transport) -> None:
        """The socket of a plain TCP transport; none over TLS or on a transport that is no socket's."""
        if not ITCPTransport.providedBy(transport) or ISSLTransport.providedBy(transport):
            return
        get_handle = getattr(transport, "getHandle", None)  # a fake may claim the interface only
        handle = get_handle() if get_handle is not None else None
        self._socket = handle if isinstance(handle, socket.socket) else None

    def close(self) -> None:
        """From here every write goes through the transport (it encrypts, or the connection closes)."""
        self._socket = None

    def send(self, data: bytes) -> bytes:
        """
        What of ``data`` is left for the transport. ``data`` goes now, in one system call: the
        kernel takes it whole in the common case. What the socket does not take (a full send
        buffer, an error the transport then finds and reports) is left, and from then on all of
        every write is, so that the bytes stay in order.
        """
        sock = self._socket
        if sock is None:
            return data
        try:
            sent = sock.send(data)
        except OSError:
            sent = 0
        if sent < len(data):
            self._socket = None
        return data[sent:]
