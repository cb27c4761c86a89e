"""The one resolver every lookup goes through (MX, verification, address checks)."""

from __future__ import annotations

from twisted.names import client


def parse_server(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``, or a bare host for port 53)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 53
    host, sep, port = text.rpartition(":")
    if sep and host and ":" not in host:
        return host, int(port)
    return text, 53


def system_servers(path: str = "/etc/resolv.conf") -> tuple[str, ...]:
    """The nameservers of resolv.conf (``host:port`` texts, as ``dns.servers``); loopback if none."""
    servers = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver":
                    servers.append(parts[1] if ":" not in parts[1] else f"[{parts[1]}]:53")
    except OSError:
        pass
    return tuple(servers) or ("127.0.0.1:53",)


def build_resolver(reactor, servers: tuple[str, ...]):
    """
    A resolver on ``servers`` only (``dns.servers``), or on the system's resolv.conf
    when none are configured. ``/etc/hosts`` is never consulted: names resolve as the world
    sees them.
    """
    if servers:
        upstream = client.Resolver(
            servers=[parse_server(s) for s in servers], resolv=None, reactor=reactor
        )
    else:
        upstream = client.Resolver(resolv="/etc/resolv.conf", reactor=reactor)
    return upstream
