"""The database-sampled gauges forget a figure that is gone, in one process and across a node's workers."""

import pytest
from prometheus_client import values
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import defer

from mailsvc.metrics import SHARED_DIR_VARIABLE, Metrics


class _Figures:
    def __init__(self, rows):
        self.rows = rows

    async def mail_today(self, day):
        return self.rows

    async def queues(self):
        return {"queue_depth": 0, "queue_age": 0, "webhook_backlog": 0, "webhook_age": 0}

    async def broadcast_progress(self):
        return {}


def mail_today(metrics: Metrics) -> dict:
    return {(s.labels["plan"], s.labels["state"]): s.value
            for family in text_string_to_metric_families(metrics.render().decode())
            if family.name == "mailsvc_mail_today" for s in family.samples}


def sample(metrics: Metrics, rows) -> None:
    defer.ensureDeferred(metrics.sample(_Figures(rows), None))


@pytest.fixture(params=["one process", "multiprocess"])
def metrics(request, tmp_path, monkeypatch):
    if request.param == "multiprocess":
        # What importing prometheus_client with the variable set chooses (the workers' mode).
        monkeypatch.setenv(SHARED_DIR_VARIABLE, str(tmp_path))
        monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue())
    return Metrics()


def test_a_figure_gone_from_the_sample_is_gone_from_the_metrics(metrics):
    sample(metrics, [{"plan": "free", "status": "queued", "n": 3}, {"plan": "free", "status": "delivered", "n": 2}])
    assert mail_today(metrics) == {("free", "queued"): 3, ("free", "sent"): 2, ("free", "accepted"): 5}
    sample(metrics, [{"plan": "free", "status": "delivered", "n": 5}])  # the queued ones went out
    shown = mail_today(metrics)
    assert {labels: n for labels, n in shown.items() if n} == {("free", "sent"): 5, ("free", "accepted"): 5}
    if not metrics.shared_dir:
        assert ("free", "queued") not in shown  # removed, as before
