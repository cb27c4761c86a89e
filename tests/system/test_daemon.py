"""The real daemon under twistd: start on the embedded default, serve, stop; and failing starts."""

import json
import signal
import socket

import pytest
import requests
import resend

from tests.helpers.daemon import free_port, twistd, wait_until_listening

#: Starts the real daemon under twistd.
pytestmark = pytest.mark.slow


#: What scripts/serve sets: a development start.
DEVELOPMENT = {"MAILSVC_DASHBOARD_FIRST_USER": "admin@example.com", "MAILSVC_DASHBOARD_FIRST_KEY_FILE": "true"}


@pytest.mark.parametrize("processes", ["1", "2"])
def test_daemon_serves_on_the_embedded_store_and_stops_cleanly(state, processes):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    daemon = twistd(state, port, MAILSVC_NODE_PROCESSES=processes, MAILSVC_MAIL_HOSTNAME="localhost", **DEVELOPMENT)
    try:
        wait_until_listening(url, daemon)
        # The first account's key, kept for the README's first steps, works as a key.
        assert oct((state / "api-key").stat().st_mode & 0o777) == "0o600"
        first_key = (state / "api-key").read_text().strip()
        listed = requests.get(url + "/api-keys", headers={"Authorization": f"Bearer {first_key}"}, timeout=10)
        assert [k["name"] for k in listed.json()["data"]] == ["first key (scripts/serve)"]
        token = (state / "operator-token").read_text().strip()
        assert oct((state / "operator-token").stat().st_mode & 0o777) == "0o600"
        created = requests.post(
            url + "/admin/v1/tenants", json={"name": "Acme"},
            headers={"Authorization": f"Bearer {token}"}, timeout=10,
        )
        assert created.status_code == 201
        key = created.json()["api_key"]["token"]
        resend.api_url, resend.api_key = url, key
        made = resend.ApiKeys.create({"name": "from the sdk"})
        assert {k["name"] for k in resend.ApiKeys.list()["data"]} == {"Default", "from the sdk"}
        resend.ApiKeys.remove(made["id"])
        assert requests.get(url + "/healthz", timeout=5).json() == {"status": "ok"}
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=60)
    # twistd ends by re-raising the signal it stopped on (systemd counts SIGTERM as clean).
    assert daemon.returncode in (0, -signal.SIGTERM), err
    assert "operator token is in" in out and f"HTTP API listening on 127.0.0.1:{port}" in out
    # The node is told once, by the process that started it; the link and the key's file come last.
    started = out[:out.index("Received SIGTERM")].splitlines()
    for once in ("starting up", "mailsvc 0.1.0: roles api, delivery", "HTTP API listening", "operator token is in",
                 "The node's mail hostname is 'localhost'", "sets a password at"):
        assert sum(once in line for line in started) == 1, (once, out)
    (told,) = [n for n, line in enumerate(started) if f"is in {state / 'api-key'}" in line]
    assert "sets a password at" in started[told - 1] and len(started) - told <= 15, out
    # The embedded cluster was stopped with the daemon.
    assert not (state / "postgresql" / "data" / "postmaster.pid").exists()

    # A second start reuses the cluster and its data, and logs JSON lines as the unit asks; the
    # first account is not made again, nor its key's file written.
    kept = (state / "api-key").stat().st_mtime_ns
    daemon = twistd(state, port, "--logger=mailsvc.logs.json_observer", MAILSVC_NODE_PROCESSES=processes,
                    MAILSVC_MAIL_HOSTNAME="mail.example.net", **DEVELOPMENT)
    try:
        wait_until_listening(url, daemon)
        listed = requests.get(url + "/api-keys", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert [k["name"] for k in listed.json()["data"]] == ["Default"]
        assert listed.json()["data"][0]["last_used_at"] is not None  # flushed at the first stop
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, _ = daemon.communicate(timeout=60)
    assert daemon.returncode in (0, -signal.SIGTERM)
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert any(e.get("log_format", "").startswith("HTTP API listening") for e in events)
    assert (state / "api-key").read_text().strip() == first_key and (state / "api-key").stat().st_mtime_ns == kept
    assert [e.get("path") for e in events if e.get("path") == str(state / "api-key")] == [str(state / "api-key")]
    assert sum("starting up" in e.get("log_format", "") for e in events) == 1
    assert not any(e.get("log_level", {}).get("name") == "warn" and "hostname" in e.get("log_format", "")
                   for e in events)


def test_port_in_use_fails_with_one_line(state, pg_dsn):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        daemon = twistd(state, taken.getsockname()[1], MAILSVC_DATABASE_DSN=pg_dsn)
        out, err = daemon.communicate(timeout=60)
    assert daemon.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("mailsvc:")]
    assert len(lines) == 1 and "cannot start" in lines[0] and "Address already in use" in lines[0]


def test_unreachable_database_fails_with_one_line(state):
    daemon = twistd(state, free_port(), MAILSVC_DATABASE_DSN="host=/nonexistent-dir dbname=x connect_timeout=2")
    out, err = daemon.communicate(timeout=60)
    assert daemon.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("mailsvc:")]
    assert len(lines) == 1 and "cannot start: database unreachable" in lines[0], err


def test_bad_config_key_fails_with_one_line(state):
    daemon = twistd(state, free_port(), MAILSVC_HTTP_LISEN="tcp:1")
    out, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 1
    assert err.strip().splitlines()[-1] == "mailsvc: configuration error: http.lisen: unknown key"
