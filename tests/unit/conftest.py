"""
The unit tier's rules, enforced: no database, no network, no daemon, no browser. A test here
that asks for one of the fixtures below (directly or through another fixture) fails at its
setup, naming the tier it belongs to; one that opens a socket fails at the call.
"""

import socket

import pytest

#: The fixtures of tests/conftest.py and tests/helpers that start PostgreSQL, a listener on
#: loopback, a daemon or a browser. ``pg_dsn`` alone covers every fixture built on the database
#: (``db``, ``api``, ``mta``, ...); the others are named so that the message names them.
OUTSIDE_THE_UNIT_TIER = frozenset({
    "pg_dsn", "template_dsn", "fresh_dsn", "db", "api", "shared_api", "mta", "start_mta_with",
    "dns_server", "smtp_sink", "https_receiver", "rig", "sts", "smtp_ports",
    "state", "browser",
})


def refused_fixtures(fixturenames) -> list[str]:
    """The fixtures among ``fixturenames`` (a test's closure) that a unit test may not use."""
    return sorted(OUTSIDE_THE_UNIT_TIER.intersection(fixturenames))


def pytest_runtest_setup(item):
    refused = refused_fixtures(item.fixturenames)
    if refused:
        pytest.fail(f"{item.nodeid} uses {', '.join(refused)}: it belongs in tests/integration "
                    f"or tests/system, not tests/unit", pytrace=False)


class NetworkInUnitTest(AssertionError):
    """A unit test tried to open a connection or a listener."""


def _refuse(self, *args, **kwargs):
    raise NetworkInUnitTest(f"a unit test may not use the network ({self.family!r}, {args!r}): "
                            f"use StringTransport or iosim, or move the test to tests/integration")


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Sockets cannot connect, bind or send in a unit test (what a listener or a client needs)."""
    for method in ("connect", "connect_ex", "bind", "sendto"):
        monkeypatch.setattr(socket.socket, method, _refuse)
