"""
A worker's share of a node's limits (docs/decisions.md, "Processes of a node"): every worker of
a node delivers and dispatches webhooks, and the node's caps (connections per destination,
deliveries and webhook requests in flight, per-host rates, a destination's shaped limits) are
divided between them, each worker keeping its part in memory, rather than counted in
PostgreSQL at every connection.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Share:
    """Worker ``slot`` of ``count`` (one process: the whole, slot 0 of 1)."""

    slot: int = 0
    count: int = 1

    def __attrs_post_init__(self):
        if not 0 <= self.slot < self.count:
            raise ValueError(f"slot {self.slot} of {self.count} workers")

    def of_count(self, total: int) -> int:
        """
        Whole units, the remainder going to the first slots (so the first worker always has
        the most); none for the last slots of a cap below the worker count.
        """
        return total // self.count + (1 if self.slot < total % self.count else 0)

    def of_rate(self, rate: float) -> float:
        """An equal part of a rate a second (0, no limit, stays 0)."""
        return rate / self.count
