"""
Anonymous clients as limits count them: by network (failed sign-ins and SMTP AUTHs in
PostgreSQL, ``mailsvc.app.throttle``), and, for the waitlist form, at a rate kept in memory
on each node (``ClientRate``).
"""

from __future__ import annotations

import ipaddress
import math
from collections import OrderedDict

#: Client networks a limit remembers; the least recently seen is forgotten first (which only
#: gives it a fresh burst).
MOST_CLIENTS = 10_000


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


class ClientRate:
    """A GCRA per client network: a burst of ``burst``, then one every ``interval`` seconds."""

    def __init__(self, interval: float, burst: int, most_clients: int = MOST_CLIENTS):
        self._interval = interval
        self._window = interval * burst
        self._most_clients = most_clients
        self._arrivals: OrderedDict[str, float] = OrderedDict()  # client → theoretical arrival

    def wait(self, client: str, now: float) -> int | None:
        """None if one more from ``client`` is within the rate; else the whole seconds to wait."""
        arrival = max(self._arrivals.get(client, now), now) + self._interval
        if client in self._arrivals:
            self._arrivals.move_to_end(client)  # seen: kept longest
        if arrival - now > self._window:
            return max(1, math.ceil(arrival - now - self._window))
        return None

    def count(self, client: str, now: float) -> None:
        """One more from ``client``, whether it was within the rate or not."""
        self._arrivals[client] = max(self._arrivals.get(client, now), now) + self._interval
        self._arrivals.move_to_end(client)
        if len(self._arrivals) > self._most_clients:
            self._arrivals.popitem(last=False)

    def take(self, client: str, now: float) -> int | None:
        """``wait``, counting the one it lets through."""
        wait = self.wait(client, now)
        if wait is None:
            self.count(client, now)
        return wait
