"""Prometheus metrics in a registry of our own (never the process-global one)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=True)
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
        self.deliveries_in_flight = Gauge(
            "mailsvc_deliveries_in_flight", "Deliveries this node has claimed and not yet finished.",
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "mailsvc_http_requests_in_flight", "HTTP requests being handled.", registry=self.registry
        )

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self._requests.labels(route, method, str(status)).inc()
        self._latency.labels(route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
