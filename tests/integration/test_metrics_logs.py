"""/metrics covers mail, queues, the pool and the loop's lag; log lines carry request id and tenant."""

from datetime import UTC, datetime

import pytest_twisted
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import reactor
from twisted.logger import Logger, globalLogPublisher

from mailsvc import logs, timefmt
from mailsvc.broadcasting.fanout import Fanout
from mailsvc.http.router import FULL, route
from mailsvc.metrics import LagProbe
from mailsvc.store import broadcasts as broadcast_rows
from mailsvc.store.stats import Figures
from tests.helpers.broadcasts import contacts, create, get, run_fanout
from tests.helpers.sending import sending_tenant


@pytest_twisted.ensureDeferred
async def test_metrics_show_the_sampled_figures(api, db):
    parts = api.parts
    parts.metrics.pool_use(*db.pool_use())
    await parts.metrics.sample(Figures(db), datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0))
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

    dashboard = json.loads((Path(__file__).parent.parent.parent / "etc" / "grafana-dashboard.json").read_text())
    names = {re.sub(r"_(total|bucket)$", "", name) for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"mailsvc_\w+", target["expr"])}
    from mailsvc.metrics import Metrics

    exported = {metric.name for metric in Metrics().registry.collect()}
    assert names <= exported, names - exported


def _progress(text: str) -> dict[str, float]:
    return {sample.labels["state"]: sample.value for family in text_string_to_metric_families(text)
            if family.name == "mailsvc_broadcast_progress" for sample in family.samples}


@pytest_twisted.ensureDeferred
async def test_broadcast_progress_counts_the_recipients_of_the_broadcasts_being_sent(api, db):
    async def progress() -> dict[str, float]:
        await api.parts.metrics.sample(Figures(db), datetime.now(UTC).replace(hour=0, minute=0, second=0,
                                                                                microsecond=0))
        response, body = await api.request("GET", "/metrics", api.operator_token)
        assert response.code == 200
        return _progress(body.decode())

    before = await progress()  # other tests' broadcasts may still be sending (a paused account's)
    assert set(before) == {"pending", "written", "skipped", "refused"}
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 30)
    created = await create(api, key, segment_id, send=True)
    await db.run("start", broadcast_rows.start_next, timefmt.from_seconds(reactor.seconds()))
    fanout = Fanout(reactor, db, api.parts.submitter, chunk=10)
    row = broadcast_rows.BroadcastRow.of(
        (await db.fetchall("SELECT * FROM broadcasts WHERE id = %s", (created["id"],)))[0])
    assert await fanout.write_chunk(row) == 10
    during = await progress()
    assert during["pending"] - before["pending"] == 20 and during["written"] - before["written"] == 10
    await run_fanout(api, fanout)
    assert (await get(api, key, created["id"]))["status"] == "sent"
    assert await progress() == before  # a sent broadcast is no longer in progress
