"""
Prometheus metrics in a registry of our own (never the process-global one). The workers of a
node share theirs through files in ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's
multiprocess mode), so that any of them answers ``/metrics`` for all.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: prometheus_client chooses where values live from this variable when it is imported.
SHARED_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
#: The fan-out states of a broadcast's recipients (store/migrations/0015_broadcasts.sql).
BROADCAST_STATES = ("pending", "written", "skipped", "refused")


class _SharedGauge:
    """
    A gauge read from a function: in multiprocess mode prometheus_client only gathers the
    values written to its files, so the function is read into the gauge by ``share()``.
    """

    def __init__(self, gauge: Gauge):
        self._gauge = gauge
        self._read: Callable[[], float] | None = None

    def set_function(self, read: Callable[[], float]) -> None:
        self._read = read

    def share(self) -> None:
        if self._read is not None:
            self._gauge.set(self._read())


class LagProbe:
    """Ticks every INTERVAL seconds (a ``Loop``'s step); how late each tick ran is the event loop's lag."""

    INTERVAL = 1.0

    def __init__(self, clock, report: Callable[[float], None]):
        self._clock = clock
        self._report = report
        self._last: float | None = None

    async def tick(self) -> None:
        now = self._clock.seconds()
        if self._last is not None:
            self._report(max(0.0, now - self._last - self.INTERVAL))
        self._last = now


class Metrics:
    def __init__(self):
        self.shared_dir = os.environ.get(SHARED_DIR_VARIABLE)
        self.registry = CollectorRegistry(auto_describe=True)
        self._rendered = self.registry
        if self.shared_dir:
            self._rendered = CollectorRegistry()
            multiprocess.MultiProcessCollector(self._rendered, self.shared_dir)
        self._requests = Counter(
            "mailsvc_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "mailsvc_http_request_duration_seconds",
            "Time from the request being read to the response being finished.",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.loop_failures = Counter(
            "mailsvc_background_failures",
            "Failures of a background loop's step, by loop.",
            ["loop"],
            registry=self.registry,
        )
        self.delivery_outcomes = Counter(
            "mailsvc_delivery_outcomes",
            "What became of delivery attempts and reports on this node: delivered, deferred, bounced,"
            " failed, complained.",
            ["outcome"],
            registry=self.registry,
        )
        self.deliveries_in_flight = self._gauge(
            "mailsvc_deliveries_in_flight", "Deliveries this node has claimed and not yet finished.",
        )
        self.in_flight = self._gauge("mailsvc_http_requests_in_flight", "HTTP requests being handled.")
        # Adaptive shaping: the current limits of each destination (an MX host's registered
        # domain) this node has seen throttle or recover; the same on every node (PostgreSQL).
        self.destination_concurrency = Gauge(
            "mailsvc_destination_concurrency_limit", "Connections allowed at once to a destination.",
            ["destination"], registry=self.registry, multiprocess_mode="max",
        )
        self.destination_rate = Gauge(
            "mailsvc_destination_rate_limit", "Messages a second allowed to a destination.",
            ["destination"], registry=self.registry, multiprocess_mode="max",
        )
        # Sampled from the database by ``sample`` (the same figures on every node of a database:
        # take max() across nodes, not sum()). Per-tenant figures are in the operator API only.
        self.mail_today = Gauge(
            "mailsvc_mail_today",
            "Recipients of mail accepted today (UTC) by plan class and state: accepted (all),"
            " sent, deferred, bounced, complained, failed, queued, scheduled, canceled.",
            ["plan", "state"], registry=self.registry, multiprocess_mode="livemax",
        )
        self._mail_today_labels: set[tuple[str, ...]] = set()
        self.queue = Gauge(
            "mailsvc_queue", "Delivery queue (deliveries due) and webhook backlog (requests pending):"
            " depth (count) and age (seconds since the oldest was due or created).",
            ["queue", "measure"], registry=self.registry, multiprocess_mode="livemax",
        )
        self.broadcast_progress = Gauge(
            "mailsvc_broadcast_progress", "Recipients of the broadcasts being sent, by state: pending (not yet"
            " written), written (accepted as e-mails), skipped (contact gone or unsubscribed), refused.",
            ["state"], registry=self.registry, multiprocess_mode="livemax",
        )
        self.pool = self._gauge_labelled(
            "mailsvc_postgres_pool", "This worker's PostgreSQL pool: size, in_use, waiting (callers queued).",
            ["measure"],
        )
        self.loop_lag = Gauge(
            "mailsvc_event_loop_lag_seconds", "How late the last 1-second tick of the event loop ran.",
            registry=self.registry, multiprocess_mode="livemax",
        )

    def destination_limits(self, destination: str, limits) -> None:
        self.destination_concurrency.labels(destination).set(limits.concurrency)
        self.destination_rate.labels(destination).set(limits.rate_per_sec)

    def _gauge_labelled(self, name: str, documentation: str, labels: list[str]) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry, multiprocess_mode="livesum")

    def _gauge(self, name: str, documentation: str) -> Gauge | _SharedGauge:
        # "livesum": the node's value is the sum of its live workers' values.
        gauge = Gauge(name, documentation, registry=self.registry, multiprocess_mode="livesum")
        return _SharedGauge(gauge) if self.shared_dir else gauge

    async def share_gauges(self) -> None:
        """Write this worker's gauges where the node's /metrics reads them."""
        for gauge in (self.deliveries_in_flight, self.in_flight):
            if isinstance(gauge, _SharedGauge):
                gauge.share()

    @staticmethod
    def process_gone(shared_dir: str, pid: int) -> None:
        """The gauges of a worker that exited no longer count (its counters still do)."""
        multiprocess.mark_process_dead(pid, shared_dir)

    async def sample(self, stats, day) -> None:
        """Set the database-sampled gauges (``stats``: ``mailsvc.store.stats.Figures`` of a database)."""
        figures: dict[tuple[str, str], int] = {}
        totals: dict[str, int] = {}
        for row in await stats.mail_today(day):
            state = "sent" if row["status"] == "delivered" else row["status"]
            figures[row["plan"], state] = row["n"]
            totals[row["plan"]] = totals.get(row["plan"], 0) + row["n"]
        figures.update({(plan, "accepted"): n for plan, n in totals.items()})
        self._forget(self.mail_today, self._mail_today_labels - figures.keys())
        for labels, n in figures.items():
            self.mail_today.labels(*labels).set(n)
        self._mail_today_labels = set(figures)
        queues = await stats.queues()
        self.queue.labels("delivery", "depth").set(queues["queue_depth"])
        self.queue.labels("delivery", "age").set(queues["queue_age"])
        self.queue.labels("webhooks", "depth").set(queues["webhook_backlog"])
        self.queue.labels("webhooks", "age").set(queues["webhook_age"])
        progress = await stats.broadcast_progress()
        for state in BROADCAST_STATES:
            self.broadcast_progress.labels(state).set(progress.get(state, 0))

    def _forget(self, gauge: Gauge, gone: set[tuple[str, ...]]) -> None:
        """
        Labels this process set before and no longer has a figure for. In multiprocess mode a
        removed label keeps its last value in this process's file (and so on /metrics): it is
        set to 0 there instead, which the other processes' own samples agree with.
        """
        for labels in gone:
            if self.shared_dir:
                gauge.labels(*labels).set(0)
            else:
                gauge.remove(*labels)

    def pool_use(self, size: int, in_use: int, waiting: int) -> None:
        self.pool.labels("size").set(size)
        self.pool.labels("in_use").set(in_use)
        self.pool.labels("waiting").set(waiting)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self._requests.labels(route, method, str(status)).inc()
        self._latency.labels(route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self._rendered)
