"""
A worker's share of its node's limits (every worker delivers): whole connections with the
remainder to the first workers, never none; rates in equal parts; and the shaping gate of each
worker on a Clock, the workers' gates together holding the node's concurrency and rate.
Shared limits on the real PostgreSQL: tests/integration/test_shaping.py.
"""

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock

from mailsvc import node, parent, processes
from mailsvc.config import load
from mailsvc.delivery.shaping import Shaper
from mailsvc.domain.shaping import Limits
from mailsvc.domain.shares import Share


@pytest.mark.parametrize(("total", "count", "parts"), [
    (10, 1, [10]),
    (10, 2, [5, 5]),
    (7, 3, [3, 2, 2]),
    (500, 3, [167, 167, 166]),
    (1, 2, [1, 0]),  # below the worker count: none for the last
])
def test_whole_units_are_divided_with_the_remainder_first(total, count, parts):
    assert [Share(slot, count).of_count(total) for slot in range(count)] == parts


def test_rates_are_divided_equally_and_no_limit_stays_none():
    assert [Share(slot, 2).of_rate(20) for slot in range(2)] == [10, 10]
    assert Share(1, 2).of_rate(0) == 0
    assert Share().of_rate(0.2) == 0.2


def test_a_slot_beyond_the_workers_is_refused():
    with pytest.raises(ValueError):
        Share(2, 2)


def test_a_worker_takes_its_slot_of_the_configured_processes():
    config = load(None, environ={"MAILSVC_NODE_PROCESSES": "3", "MAILSVC_STATE_DIR": "/nonexistent"})
    assert node.worker_share(config, processes.Inherited(2, {})) == Share(2, 3)
    assert node.worker_share(config, None) == Share()  # one process: the node's whole


@pytest.mark.parametrize(("settings", "roles"), [
    ({}, [("api", "delivery", "webhooks", "scheduler"), ("api", "delivery", "webhooks")]),
    # A cap below the worker count: the worker whose share is none does not run the role.
    ({"MAILSVC_DELIVERY_PER_DESTINATION": "1"}, [("api", "delivery", "webhooks", "scheduler"), ("api", "webhooks")]),
    ({"MAILSVC_WEBHOOKS_HOST_CONCURRENCY": "1"}, [("api", "delivery", "webhooks", "scheduler"), ("api", "delivery")]),
])
def test_a_worker_runs_delivery_and_webhooks_only_with_a_share_of_their_caps(settings, roles):
    config = load(None, environ={"MAILSVC_NODE_PROCESSES": "2", "MAILSVC_STATE_DIR": "/nonexistent",
                                 "MAILSVC_NODE_ROLES": "api,delivery,webhooks,scheduler", **settings})
    assert [parent.worker_roles(config, slot) for slot in range(2)] == roles


def test_a_destination_throttled_below_the_worker_count_keeps_one_connection_a_worker():
    """None would leave what a worker claimed for it waiting until the attempt's deadline."""
    workers = [Shaper(Clock(), None, "default", Limits(1, 0.4), share=Share(slot, 2)) for slot in range(2)]
    assert [w.own("example.net") for w in workers] == [Limits(1, 0.2), Limits(1, 0.2)]


def starts(shaper: Shaper, clock: Clock, n: int) -> list[defer.Deferred]:
    return [defer.ensureDeferred(shaper.acquire("mx.example.net", clock.seconds() + 1000)) for _ in range(n)]


def test_each_workers_gate_keeps_its_share_and_together_the_nodes_limits():
    clock = Clock()
    workers = [Shaper(clock, None, "default", Limits(5, 4), share=Share(slot, 2)) for slot in range(2)]
    assert [w.own("example.net") for w in workers] == [Limits(3, 2), Limits(2, 2)]
    assert workers[1].limits("example.net") == Limits(5, 4)  # the node's, as written and shown
    waiting = [starts(w, clock, 4) for w in workers]
    # Over two seconds: each worker starts two a second (4/s for the node) ...
    clock.advance(0)
    assert [sum(d.called for d in ds) for ds in waiting] == [1, 1]
    clock.advance(0.5)
    assert [sum(d.called for d in ds) for ds in waiting] == [2, 2]
    clock.advance(2)
    # ... up to its connections: 3 and 2, the node's 5.
    assert [sum(d.called for d in ds) for ds in waiting] == [3, 2]
    workers[1].release("mx.example.net")
    clock.advance(1)
    assert [sum(d.called for d in ds) for ds in waiting] == [3, 3]
