"""
Shared fixtures: one throw-away PostgreSQL cluster per test run (or ``MAILSVC_TEST_DSN``), one
migrated template database, a fresh database cloned from it for every test, and the whole
HTTP application assembled as the daemon assembles it, listening on loopback.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil

import psycopg2
import pytest
import pytest_twisted
import treq
from twisted.internet import defer, reactor
from twisted.web.client import HTTPConnectionPool

from mailsvc import compose
from mailsvc.config import Config, load
from mailsvc.store.database import Database
from mailsvc.store.embedded import FAST_SETTINGS, EmbeddedCluster, find_bindir
from mailsvc.store.migrate import migrate
from tests.helpers import knobs
from tests.helpers.browser import browser, daemon  # noqa: F401 (fixtures: headless Chromium, a browser walk's node)
from tests.helpers.daemon import state  # noqa: F401 (a fixture: a daemon's state directory)
from tests.helpers.dnsserver import dns_server  # noqa: F401 (a fixture: the loopback DNS server)
from tests.helpers.mta import start_mta, stop_mta
from tests.helpers.mta_sts import sts  # noqa: F401 (a fixture: a node fetching MTA-STS policies)
from tests.helpers.outside import ca, https_receiver  # noqa: F401 (fixtures: a test CA, an HTTPS receiver)
from tests.helpers.scratch import scratch_dir
from tests.helpers.smtp import pem, smtp_ports  # noqa: F401 (fixtures: a certificate, submission ports)
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture: a scriptable SMTP sink on loopback)
from tests.helpers.spares import SpareDatabases
from tests.helpers.webhooks import ca_file, rig  # noqa: F401 (fixtures: webhook dispatch nodes)

# The tests send to reserved names (example.com, *.example, *.test) routed to loopback peers:
# nodes they start as processes (which inherit the environment) do not refuse them.
os.environ.setdefault("MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS", "false")
for _name, _value in knobs.NODE.items():  # and take the tests' knobs (tests/helpers/knobs.py)
    os.environ.setdefault(_name, _value)

TEMPLATE = "mailsvc_template"


def _dsn_with(dsn: str, dbname: str) -> str:
    parts = [p for p in dsn.split() if not p.startswith("dbname=")]
    return " ".join([*parts, f"dbname={dbname}"])


def _admin(dsn: str):
    conn = psycopg2.connect(_dsn_with(dsn, "postgres"))
    conn.autocommit = True
    return conn


@pytest.fixture(scope="session")
def pg_dsn():
    """The DSN of a PostgreSQL server the tests may create databases in."""
    configured = os.environ.get("MAILSVC_TEST_DSN")
    if configured:
        yield configured
        return
    root = scratch_dir("mailsvc-test-pg-")
    cluster = EmbeddedCluster(reactor, root / "pg", find_bindir(), FAST_SETTINGS)
    cluster.start_now()
    try:
        yield cluster.dsn
    finally:
        cluster.stop_now()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def template_dsn(pg_dsn):
    """A database migrated once per run; every test's database is a copy of it."""
    conn = _admin(pg_dsn)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {TEMPLATE}")
    conn.close()
    dsn = _dsn_with(pg_dsn, TEMPLATE)

    async def run():
        db = Database(reactor, dsn, 1)
        await db.start()
        try:
            await migrate(db)
        finally:
            db.stop()

    pytest_twisted.blockon(defer.ensureDeferred(run()))
    return dsn


@pytest.fixture(scope="session")
def spare_databases(pg_dsn, template_dsn):
    """The tests' own databases, each cloned while the test before it ran (tests/helpers/spares.py)."""
    spares = SpareDatabases(lambda: _admin(pg_dsn), TEMPLATE)
    yield spares
    spares.close()


@pytest.fixture
def fresh_dsn(pg_dsn, spare_databases):
    """The DSN of a database of this test's own, migrated."""
    name = spare_databases.take()
    try:
        yield _dsn_with(pg_dsn, name)
    finally:
        spare_databases.drop(name)


@pytest_twisted.async_yield_fixture
async def db(fresh_dsn):
    database = Database(reactor, fresh_dsn, 4)
    await database.start()
    yield database
    database.stop()


def _tests_config() -> Config:
    """Defaults, but for the tests' addresses on reserved names (example.com), which they send to,
    and the tests' knobs (tests/helpers/knobs.py)."""
    return load(None, environ={**knobs.NODE, "MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS": "false"})


@pytest.fixture
def config() -> Config:
    """The configuration ``api`` assembles the application with (``_tests_config``)."""
    return _tests_config()


class Api:
    """The assembled application on a loopback port, with an HTTP client and helpers."""

    def __init__(self, parts: compose.Parts, port, operator_token: str):
        self.parts = parts
        self.port = port
        self.operator_token = operator_token
        self.url = f"http://127.0.0.1:{port.getHost().port}"
        self.pool = HTTPConnectionPool(reactor, persistent=False)

    async def request(self, method: str, path: str, key: str | None = None, **kwargs):
        headers = dict(kwargs.pop("headers", {}) or {})
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        response = await treq.request(
            method, self.url + path, headers=headers, pool=self.pool, **kwargs
        )
        body = await response.content()
        return response, body

    async def json(self, method: str, path: str, key: str | None = None, **kwargs):
        import json

        response, body = await self.request(method, path, key, **kwargs)
        return response.code, (json.loads(body) if body else None), response

    async def tenant(self, **fields) -> tuple[dict, str]:
        """A new tenant through the operator API; returns it and its first key's token."""
        body = {"name": "Acme", **fields}
        code, created, _ = await self.json("POST", "/admin/v1/tenants", self.operator_token, json=body)
        assert code == 201, created
        tenant_id = created["id"]
        # Tests make many calls a second; the default 10/s is tested on its own.
        if "api_rate_per_sec" not in fields:
            await self.json(
                "PATCH", f"/admin/v1/tenants/{tenant_id}", self.operator_token,
                json={"api_rate_per_sec": 100000},
            )
        return created, created["api_key"]["token"]


@pytest.fixture
def assembly() -> dict:
    """What ``api`` passes to ``compose.assemble`` beside its defaults (a module's own clock of the accept path)."""
    return {}


@contextlib.asynccontextmanager
async def _serving(db: Database, config: Config, assembly: dict):
    """The application assembled on ``db``, listening on loopback until the block ends."""
    operator_token = "op_" + secrets.token_urlsafe(16)
    parts = compose.assemble(reactor, config, db, secrets.token_bytes(32), operator_token, **assembly)
    port = reactor.listenTCP(0, parts.site, interface="127.0.0.1")
    app = Api(parts, port, operator_token)
    try:
        yield app
    finally:
        await app.pool.closeCachedConnections()
        await port.stopListening()
        await parts.service.stopService()  # what of the tree a test started (loops, engines)


@pytest_twisted.async_yield_fixture
async def api(db, config, tmp_path, assembly):
    async with _serving(db, config, assembly) as app:
        yield app


@pytest.fixture(scope="module")
def shared_config() -> Config:
    """``shared_api``'s configuration: the ``config`` fixture's, unless the module gives its own."""
    return _tests_config()


@pytest_twisted.async_yield_fixture(scope="module")
async def shared_api(pg_dsn, spare_databases, shared_config):
    """
    One application (and database) for the tests of a module that only read, made for its first
    such test instead of for each (``api``'s database clone and assembly). Only for tests that write
    nothing another could see, nor read what another changes (a counter in /metrics, the waitlist):
    a test that writes takes ``api``.
    """
    name = spare_databases.take()
    database = Database(reactor, _dsn_with(pg_dsn, name), 4)
    await database.start()
    try:
        async with _serving(database, shared_config, {}) as app:
            yield app
    finally:
        database.stop()
        spare_databases.drop(name)


@pytest_twisted.async_yield_fixture
async def mta(db, dns_server, smtp_sink):  # noqa: F811 (fixtures imported above)
    """The application with its delivery worker running, aimed at ``smtp_sink`` (tests/helpers/mta.py)."""
    running = await start_mta(Api, db, dns_server, smtp_sink)
    yield running
    await stop_mta(running)


@pytest_twisted.async_yield_fixture
async def start_mta_with(db, dns_server, smtp_sink):  # noqa: F811 (fixtures imported above)
    """Starts the application with its delivery worker with configuration overrides (environment
    names); each call is another node on the same database; all are stopped after the test."""
    started = []
    master = secrets.token_bytes(32)

    async def start(**environ):
        node = await start_mta(Api, db, dns_server, smtp_sink, master, **environ)
        started.append(node)
        return node

    yield start
    for node in started:
        await stop_mta(node)
