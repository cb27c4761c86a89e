"""
Anonymous clients as limits count them: by network (failed sign-ins and SMTP AUTHs, and the
waitlist form's requests, in PostgreSQL: ``mailsvc.app.throttle``).
"""

from __future__ import annotations

import ipaddress


def network_of(host: str | None) -> str:
    """
    The network a peer counts as: its IPv4 address (a v4-mapped IPv6 one too), or the /64 of
    its IPv6 address (one host usually holds a whole /64); "local" for a Unix socket.
    """
    if host is None:
        return "local"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 6 and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    if address.version == 4:
        return str(address)
    return str(ipaddress.ip_network(f"{address}/64", strict=False))
