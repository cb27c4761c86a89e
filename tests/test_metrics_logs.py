"""/metrics covers mail, queues, the pool and the loop's lag; log lines carry request id and tenant."""

from datetime import UTC, datetime

import pytest_twisted
from twisted.logger import Logger, globalLogPublisher

from mailsvc import logs
from mailsvc.compose import LagProbe, StatsOf
from mailsvc.http.router import FULL, route


@pytest_twisted.ensureDeferred
async def test_metrics_show_the_sampled_figures(api, db):
    parts = api.parts
    parts.metrics.pool_use(*db.pool_use())
    await parts.metrics.sample(StatsOf(db), datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0))
    parts.metrics.loop_lag.set(0.25)
    response, body = await api.request("GET", "/metrics", api.operator_token)
    assert response.code == 200
    text = body.decode()
    for line in ['mailsvc_queue{measure="depth",queue="delivery"} 0.0',
                 'mailsvc_queue{measure="depth",queue="webhooks"} 0.0',
                 'mailsvc_postgres_pool{measure="size"}',
                 'mailsvc_postgres_pool{measure="in_use"}',
                 "mailsvc_event_loop_lag_seconds 0.25",
                 "# HELP mailsvc_mail_today", "# HELP mailsvc_broadcast_progress"]:
        assert line in text, line


def test_the_lag_probe_reports_how_late_a_tick_ran():
    from twisted.internet.task import Clock

    clock, seen = Clock(), []
    probe = LagProbe(clock, seen.append)
    for advance in (0, 1.0, 1.5):
        clock.advance(advance)
        coroutine = probe.tick()
        try:
            coroutine.send(None)
        except StopIteration:
            pass
    assert seen == [0.0, 0.5]


class _Talks:
    log = Logger()

    @route("GET", "/test-only/talk", access=FULL)
    async def talk(self, request, caller):
        self.log.info("a line logged inside the handler")
        return {"ok": True}


@pytest_twisted.ensureDeferred
async def test_every_line_logged_for_a_request_names_the_request_and_the_tenant(api):
    tenant, key = await api.tenant()
    api.parts.router.mount(_Talks())
    seen = []
    observer = logs.with_request(seen.append)
    globalLogPublisher.addObserver(observer)
    try:
        response, _ = await api.request("GET", "/test-only/talk", key)
    finally:
        globalLogPublisher.removeObserver(observer)
    assert response.code == 200
    inside = [e for e in seen if e.get("log_format") == "a line logged inside the handler"]
    assert len(inside) == 1
    assert inside[0]["tenant"] == tenant["id"]
    assert inside[0]["request_id"] == response.headers.getRawHeaders("x-request-id")[0]
    # Outside any request nothing is added.
    Logger().info("outside")
    assert logs.REQUEST.get() is None


def test_the_grafana_dashboard_reads_metrics_the_node_exports():
    import json
    import re
    from pathlib import Path

    dashboard = json.loads((Path(__file__).parent.parent / "etc" / "grafana-dashboard.json").read_text())
    names = {re.sub(r"_(total|bucket)$", "", name) for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"mailsvc_\w+", target["expr"])}
    from mailsvc.metrics import Metrics

    exported = {metric.name for metric in Metrics().registry.collect()}
    assert names <= exported, names - exported
