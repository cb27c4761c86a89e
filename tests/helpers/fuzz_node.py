"""
Runs schemathesis against a live node: ``python -m tests.helpers.fuzz_node``, inside a network
namespace of its own (tests/system/test_schemathesis.py starts it under ``unshare --net``, with only
the loopback interface up), so that whatever address or URL the fuzzer makes up, nothing
outside the machine can be reached: the daemon's DNS is the tests' loopback server (every name
NXDOMAIN), and delivery, webhooks and attachment paths have no route out. The fuzzed tenant's
mail does not even try: its ``delivery_mode`` is ``capture`` (signed and kept in the inbox, never sent).

The node runs every role on its embedded PostgreSQL. One tenant on the top plan, with rate
and quotas out of the way and capture delivery, is the ``bearer`` credential; the operator
token is ``admin``; a dashboard user of that tenant and an operator signed in to the console
give the dashboard's and the console's routes their sessions.
schemathesis reads /openapi.json and checks: no 5xx, every status documented, every response
(errors included, so their envelope) matching its schema, the documented content type.

Prints the run's last lines and ``cases: N``; exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import requests

from tests.helpers import knobs
from tests.helpers.polling import until
from tests.helpers.scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: Examples per operation and per phase. 255 operations fuzzed (the dashboard's copies of the
#: API routes included; broadcasts, the spam check, DMARC and shaping since 218); schemathesis's
#: phases (examples, coverage, fuzzing, stateful) add their own cases. 10 gave 9,464 cases in
#: 120 s at 218 operations; 7 gives 10,328 cases in about 75 s at 255 on 2 cores, well over the
#: 5,000 tests/system/test_schemathesis.py asserts.
MAX_EXAMPLES = int(os.environ.get("MAILSVC_FUZZ_EXAMPLES", "7"))
#: The console's copies of the operator routes and the dashboard's copies of the API routes run
#: the handler of the route they copy (fuzzed with MAX_EXAMPLES) behind another access: fewer
#: examples each.
COPY_EXAMPLES = 2
#: The dashboard's routes of its own: fewer than MAX_EXAMPLES too (they were fuzzed with the
#: dashboard's copies, at 3, when those were).
DASHBOARD_EXAMPLES = 3
#: How the served document says a route is a copy (mailsvc/http/openapi.py): the same handler,
#: body and replies. A copy skips the coverage phase, whose cases (every boundary and missing
#: field of the body, every undeclared method) its original already sends to the same handler;
#: its examples, fuzzing and stateful phases stay (its access and error envelope are its own).
COPY_OF = ("The dashboard's copy of ", "The operator console's copy of ")
#: What can end the run's own credentials: its API key revoked or narrowed, its dashboard or
#: console session or its user ended, its tenant changed (suspended, its rates lowered), its
#: operator token revoked. Fuzzed with the others, they ended them mid-run (a coverage case
#: deletes the key it reads from GET /api-keys), and every later case of the routes behind them
#: was a 401 or a 403: these are fuzzed in a pass of their own, after every other route's.
ENDING = (
    "DELETE /api-keys/{key_id}", "DELETE /v1/api-keys/{key_id}", "DELETE /dashboard/api-keys/{key_id}",
    "PATCH /api-keys/{key_id}", "PATCH /dashboard/api-keys/{key_id}",
    "DELETE /dashboard/sessions/{session_id}", "POST /dashboard/sessions/sign-out-others",
    "DELETE /dashboard/users/{user_id}", "POST /dashboard/password", "PATCH /dashboard/security",
    "POST /dashboard/two-factor/disable", "POST /auth/logout", "POST /console/auth/logout",
    "PATCH /admin/v1/tenants/{tenant_id}", "PATCH /console/admin/v1/tenants/{tenant_id}",
    "POST /admin/v1/users/two-factor/reset", "POST /console/admin/v1/users/two-factor/reset",
    "POST /admin/v1/users/password-link", "POST /console/admin/v1/users/password-link",
    "DELETE /admin/v1/operator-tokens/{token_id}", "DELETE /console/admin/v1/operator-tokens/{token_id}",
)
# One worker: hypothesis 6.170 with two worker threads hit an internal AST recursion error.
WORKERS = os.environ.get("MAILSVC_FUZZ_WORKERS", "1")
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance"

DNS = """
import sys
from twisted.internet import reactor
sys.path.insert(0, {root!r})
from tests.helpers.dnsserver import DNSServer
server = DNSServer()
server.start()
print(server.address, flush=True)
reactor.run()
"""


def _wait(url: str, process: subprocess.Popen, seconds: float = 90) -> None:
    def healthy() -> bool:
        if process.poll() is not None:
            raise SystemExit(f"daemon exited: {process.communicate()}")
        try:
            return requests.get(url + "/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    until(healthy, seconds, "the daemon answering /healthz", interval=0.2)


def main() -> int:
    top = scratch_dir("mailsvc-fuzz-")  # the embedded cluster runs as the mailsvc user when started as root
    state = top / "state"
    started: list[subprocess.Popen] = []
    try:
        dns = subprocess.Popen([sys.executable, "-c", DNS.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
        started.append(dns)
        dns_address = dns.stdout.readline().strip()
        port = 18000 + os.getpid() % 1000
        url = f"http://127.0.0.1:{port}"
        # The tests' knobs (cheap password hashes) when run on its own, as pytest's nodes take them.
        env = dict(
            {**knobs.NODE, **os.environ}, PYTHONPATH=str(ROOT), MAILSVC_STATE_DIR=str(state),
            MAILSVC_HTTP_LISTEN=f"tcp:{port}:interface=127.0.0.1", MAILSVC_SMTP_SUBMISSION="",
            MAILSVC_SMTP_INBOUND="tcp:0:interface=127.0.0.1", MAILSVC_DNS_SERVERS=dns_address,
            MAILSVC_NODE_PROCESSES="1", MAILSVC_MAIL_HOSTNAME="mail.fuzz.test",
            MAILSVC_DELIVERY_PORT="2525",
        )
        log = open(top / "daemon.log", "w")
        daemon = subprocess.Popen([str(BIN / "twistd"), "--nodaemon", "--pidfile=", "mailsvc"],
                                  env=env, cwd=top, stdout=log, stderr=subprocess.STDOUT)
        started.append(daemon)
        _wait(url, daemon)
        operator = (state / "operator-token").read_text().strip()
        admin = {"Authorization": f"Bearer {operator}"}
        tenant = requests.post(url + "/admin/v1/tenants", json={"name": "Fuzz", "plan": "scale"},
                               headers=admin, timeout=10).json()
        patched = requests.patch(url + f"/admin/v1/tenants/{tenant['id']}", headers=admin, timeout=10, json={
            "api_rate_per_sec": 1000000, "daily_quota": 1000000000, "monthly_quota": 1000000000,
            "delivery_mode": "capture",
        })
        patched.raise_for_status()
        if patched.json()["delivery_mode"] != "capture":
            raise SystemExit(f"the fuzz tenant is not in capture mode: {patched.json()}")
        # A dashboard user of that tenant, signed in through its set-password link: the
        # session cookie and its CSRF token are the dashboard routes' credentials.
        user = requests.post(url + f"/admin/v1/tenants/{tenant['id']}/users", headers=admin, timeout=10,
                             json={"email": "owner@fuzz.test"})
        user.raise_for_status()
        link_token = user.json()["set_password_url"].rsplit("/", 1)[1]
        signed = requests.post(url + "/auth/password", timeout=30,
                               json={"token": link_token, "password": "fuzz-password-0123"})
        signed.raise_for_status()
        # An operator signed in to the console the same way: its cookie, and its own CSRF token
        # for the console's routes (the dashboard's would be refused there).
        created = requests.post(url + "/admin/v1/operators", headers=admin, timeout=10,
                                json={"email": "ops@fuzz.test"})
        created.raise_for_status()
        console = requests.post(url + "/console/auth/password", timeout=30, json={
            "token": created.json()["set_password_url"].rsplit("/", 1)[1], "password": "fuzz-password-0123"})
        console.raise_for_status()
        config = top / "schemathesis.toml"
        config.write_text(_config(url, tenant["api_key"]["token"], operator, signed, console))
        report = top / "report"
        # Every route but those that end credentials, then those on their own (the same seed).
        excluded = [arg for label in ENDING for arg in ("--exclude-name", label)]
        included = [arg for label in ENDING for arg in ("--include-name", label)]
        returncode = max(_run(url, config, report / "main", top, excluded),
                         _run(url, config, report / "ending", top, included))
        cases = _cases(report)
        print(f"cases: {cases}")
        errors = [line for line in (top / "daemon.log").read_text().splitlines() if "Traceback" in line
                  or "unhandled error" in line]
        if errors:
            print("daemon logged errors:\n" + "\n".join(errors[:20]))
        return returncode
    finally:
        for process in reversed(started):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        shutil.rmtree(top, ignore_errors=True)


def _config(url: str, bearer: str, operator: str, signed: requests.Response, console: requests.Response) -> str:
    """schemathesis.toml: the credentials (the console's CSRF token on the console's routes), the
    examples per operation, fewer for copies and no coverage phase for a copy (``COPY_OF``)."""
    doc = requests.get(url + "/openapi.json", timeout=30).json()
    operations = {f"{method.upper()} {path}": operation for path, item in doc["paths"].items()
                  for method, operation in item.items()}
    copies = sorted(label for label, operation in operations.items()
                    if (operation.get("description") or "").startswith(COPY_OF))
    assert copies, "the document names no copy: COPY_OF no longer matches mailsvc/http/openapi.py"
    assert set(ENDING) <= set(operations), f"not served: {sorted(set(ENDING) - set(operations))}"
    return (
        f'base-url = "{url}"\n'
        f'generation.max-examples = {MAX_EXAMPLES}\n'
        f'[auth.openapi.bearer]\nbearer = "{bearer}"\n'
        f'[auth.openapi.admin]\nbearer = "{operator}"\n'
        f'[auth.openapi.sessionCookie]\napi_key = "{signed.cookies["mailsvc_session"]}"\n'
        f'[auth.openapi.csrfToken]\napi_key = "{signed.json()["csrf_token"]}"\n'
        f'[auth.openapi.consoleCookie]\napi_key = "{console.cookies["mailsvc_operator"]}"\n'
        f'[[operations]]\ninclude-path-regex = "^/console/"\n'
        f'headers = {{"X-CSRF-Token" = "{console.json()["csrf_token"]}"}}\n'
        # The first block of an operation that sets a value is the one that counts: the copies' first.
        + f"[[operations]]\ninclude-name = {json.dumps(copies)}\nphases.coverage.enabled = false\n"
        f"generation.max-examples = {COPY_EXAMPLES}\n"
        f'[[operations]]\ninclude-path-regex = "^/dashboard/"\ngeneration.max-examples = {DASHBOARD_EXAMPLES}\n'
    )


def _run(url: str, config: Path, report: Path, top: Path, only: list[str]) -> int:
    """One schemathesis run over the operations ``only`` selects; its exit status."""
    run = subprocess.run(
        [str(BIN / "st"), "--config-file", str(config), "run", url + "/openapi.json",
         "--checks", CHECKS, "--workers", WORKERS,
         "--continue-on-failure", "--seed", os.environ.get("MAILSVC_FUZZ_SEED", "22"),
         "--request-timeout", "30", "--report", "ndjson", "--report-dir", str(report),
         # /metrics: text, and its counters move with every request.
         "--exclude-path", "/metrics", *only],
        cwd=top, capture_output=True, text=True,
    )
    print(run.stdout)
    print(run.stderr[-3000:], file=sys.stderr)
    return run.returncode


def _cases(report: Path) -> int:
    """Test cases sent, counted from the ndjson events (one ScenarioFinished per case)."""
    total = 0
    for path in report.rglob("*.ndjson"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            for name, body in event.items():
                if name == "ScenarioFinished":
                    total += len((body.get("recorder") or {}).get("cases") or {})
    return total


if __name__ == "__main__":
    sys.exit(main())
