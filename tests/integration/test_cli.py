"""
The ``mailsvc`` command line: against a real node for the routes it has (tenants, user links,
and everything ``mailsvc doctor`` asks), against tests/helpers/fake_operator.py for the operator's queue,
operator tokens, audit log and tenants list. The command is synchronous: it runs in a thread,
so that the reactor (the node, the DNS server) keeps serving it.
"""

import io
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import pytest_twisted as pt
from twisted.internet import threads
from twisted.names import dns

from mailsvc.cli import main, parser
from mailsvc.cli.queue import CONFIRM_ABOVE
from mailsvc.crypto.tls import self_signed
from tests.helpers.fake_operator import Delivery, FakeOperatorApi
from tests.helpers.outside import ThrowawayCA

ROOT = Path(__file__).resolve().parents[2]


async def mailsvc(*argv: str, environ: dict, stdin: str = "") -> tuple[int, str, str]:
    """Runs the command; its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = await threads.deferToThread(main, list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err,
                                       environ=environ)
    return code, out.getvalue(), err.getvalue()


@pt.async_yield_fixture
async def fake_api():
    """tests/helpers/fake_operator.py running on loopback (its token: ``op_fake``)."""
    running = FakeOperatorApi("op_fake")
    running.start()
    yield running
    await running.stop()


def node(api) -> dict:
    return {"MAILSVC_URL": api.url, "MAILSVC_OPERATOR_TOKEN": api.operator_token}


def fake(running: FakeOperatorApi) -> dict:
    return {"MAILSVC_URL": running.url, "MAILSVC_OPERATOR_TOKEN": running.token}


# -- finding the node and its token -----------------------------------------------------------


@pt.ensureDeferred
async def test_url_and_token_come_from_the_configuration_and_the_state_dir(api, tmp_path):
    port = api.port.getHost().port
    conf = tmp_path / "mailsvc.conf"
    conf.write_text(f"[state]\ndir = {tmp_path}\n[http]\nlisten = tcp:{port}:interface=127.0.0.1\n")
    (tmp_path / "operator-token").write_text(api.operator_token + "\n")
    _, tenant, _ = await api.json("POST", "/admin/v1/tenants", api.operator_token, json={"name": "Found"})

    code, out, err = await mailsvc("tenant", "show", tenant["id"], "--config", str(conf), environ={})
    assert (code, err) == (0, "")
    assert re.search(r"^name\s+Found$", out, re.M)

    # MAILSVC_OPERATOR_TOKEN, then --token-file, override the state dir's token.
    code, _, err = await mailsvc("tenant", "show", tenant["id"], "--config", str(conf),
                                 environ={"MAILSVC_OPERATOR_TOKEN": "op_not_it"})
    assert code == 1 and "403 forbidden" in err
    wrong = tmp_path / "wrong"
    wrong.write_text("op_wrong\n")
    code, _, err = await mailsvc("tenant", "show", tenant["id"], "--config", str(conf), "--token-file", str(wrong),
                                 environ={})
    assert code == 1 and "403 forbidden" in err
    # A missing token file says where it looked.
    (tmp_path / "operator-token").unlink()
    code, _, err = await mailsvc("tenant", "show", tenant["id"], "--config", str(conf), environ={})
    assert code == 1 and str(tmp_path / "operator-token") in err


def test_plain_http_is_refused_except_to_loopback_and_no_token_is_an_argument():
    err = io.StringIO()
    code = main(["tenants"], stderr=err, environ={"MAILSVC_URL": "http://mail.example.com:8080",
                                                  "MAILSVC_OPERATOR_TOKEN": "op_x"})
    assert code == 1 and "plain http" in err.getvalue()
    for option in ("--token", "--operator-token"):
        with pytest.raises(SystemExit):
            parser().parse_args(["tenants", option, "op_x"])


def test_every_verb_has_help_with_an_example(capsys):
    verbs = [["queue"], ["queue", "list"], ["queue", "retry"], ["queue", "hold"], ["queue", "release"],
             ["queue", "bounce"], ["tenants"], ["tenant", "create"], ["tenant", "show"], ["tenant", "set"],
             ["user", "link"], ["audit"], ["tokens", "list"], ["tokens", "create"], ["tokens", "revoke"],
             ["doctor"]]
    for verb in verbs:
        with pytest.raises(SystemExit) as exited:
            parser().parse_args([*verb, "--help"])
        assert exited.value.code == 0
        text = capsys.readouterr().out
        assert f"example:\n  mailsvc {' '.join(verb)}" in text, verb
    # Reads take --json.
    for verb in [v for v in verbs if v[-1] not in ("retry", "hold", "release", "bounce", "revoke")]:
        assert parser().parse_args([*verb, *(["x"] if verb[-1] in ("show", "set", "link", "create") else []),
                                    "--json"]).json


def test_python_m_runs_the_command():
    run = subprocess.run([sys.executable, "-m", "mailsvc.cli", "--help"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert run.returncode == 0 and "doctor" in run.stdout


@pt.ensureDeferred
async def test_a_reader_that_stops_reading_ends_the_command_quietly(fake_api):
    """``mailsvc queue | grep -q gmail`` under ``pipefail``: the pipe closes before the command
    writes; it ends as a tool that SIGPIPE ended, with no traceback."""
    fake_api.deliveries += [Delivery("gmail.com", str(uuid.uuid4()), age=60)]

    def run() -> tuple[int, bytes]:
        command = subprocess.Popen([sys.executable, "-m", "mailsvc.cli", "queue"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, cwd=ROOT, env={"PATH": "/usr/bin:/bin", **fake(fake_api)})
        command.stdout.close()
        _, err = command.communicate(timeout=60)
        return command.returncode, err

    assert await threads.deferToThread(run) == (141, b"")


# -- tenants and users on a node --------------------------------------------------------------


@pt.ensureDeferred
async def test_tenant_create_show_and_set(api):
    code, out, err = await mailsvc("tenant", "create", "Acme CLI", "--plan", "growth", environ=node(api))
    assert code == 0, err
    token = re.search(r"shown once, keep it now\): (re_\S+)", out)[1]
    tenant_id = re.search(r"^id\s+(\S+)$", out, re.M)[1]
    code, _, _ = await api.json("GET", "/v1/usage", token)
    assert code == 200

    code, out, _ = await mailsvc("tenant", "show", tenant_id, "--json", environ=node(api))
    shown = json.loads(out)
    assert (code, shown["name"], shown["plan"]) == (0, "Acme CLI", "growth")

    code, out, _ = await mailsvc("tenant", "set", tenant_id, "--status", "paused", "--reason", "bounce rate 6%",
                                 "--daily-quota", "5", "--delivery-mode", "capture", environ=node(api))
    assert code == 0 and re.search(r"^status\s+paused$", out, re.M)
    _, stored, _ = await api.json("GET", f"/admin/v1/tenants/{tenant_id}", api.operator_token)
    assert (stored["status"], stored["status_reason"], stored["daily_quota"], stored["delivery_mode"]) == \
        ("paused", "bounce rate 6%", 5, "capture")

    code, _, err = await mailsvc("tenant", "show", str(uuid.uuid4()), environ=node(api))
    assert code == 1 and "404" in err
    code, _, err = await mailsvc("tenant", "set", tenant_id, environ=node(api))
    assert code == 1 and "nothing to change" in err


@pt.ensureDeferred
async def test_user_link_for_a_new_and_an_existing_user(api):
    created, _ = await api.tenant()
    code, link, err = await mailsvc("user", "link", "Owner@Acme.example", "--tenant", created["id"],
                                    environ=node(api))
    assert code == 0 and "takes over the account" in err
    assert link.startswith(api.url + "/ui/#/set-password/")

    # An existing user (a locked-out owner): found by address, in whichever tenant.
    code, again, _ = await mailsvc("user", "link", "owner@acme.example", environ=node(api))
    assert code == 0 and again.startswith(api.url + "/ui/#/set-password/")
    token = again.strip().rsplit("/", 1)[1]
    code, session, _ = await api.json("POST", "/auth/password", json={"token": token, "password": "a long passphrase"})
    assert code == 200, session

    code, _, err = await mailsvc("user", "link", "nobody@acme.example", environ=node(api))
    assert code == 1 and "404 not_found" in err
    # The operator route itself: the operator token only.
    code, _, _ = await api.json("POST", "/admin/v1/users/password-link", json={"email": "owner@acme.example"})
    assert code == 401
    # Both links are in the audit log, under the operator token's name (they can take over an account).
    code, audit, _ = await api.json("GET", "/admin/v1/audit", api.operator_token)
    links = [e for e in audit["data"] if e["action"] == "user.link"]
    assert code == 200 and len(links) == 2 and {e["actor"] for e in links} == {"operator"}, audit


@pt.ensureDeferred
async def test_operators_create_makes_a_console_account_whose_link_signs_in(api):
    code, link, err = await mailsvc("operators", "create", "Olga@Ops.example", "--name", "Olga", environ=node(api))
    assert code == 0 and "operator console" in err, err
    assert link.startswith(api.url + "/console/#/set-password/")
    code, _, err = await mailsvc("operators", "create", "olga@ops.example", environ=node(api))
    assert code == 1 and "409" in err
    code, again, _ = await mailsvc("operators", "create", "olga@ops.example", "--link", "--json", environ=node(api))
    assert code == 0 and json.loads(again)["name"] == "Olga"
    token = json.loads(again)["set_password_url"].rsplit("/", 1)[1]
    code, body, _ = await api.json("POST", "/console/auth/password",
                                   json={"token": token, "password": "a long passphrase"})
    assert code == 200 and body["email"] == "olga@ops.example", body


# -- the queue, operator tokens, the audit log, the tenants list (tests/helpers/fake_operator.py) ----


@pt.ensureDeferred
async def test_queue_summary_as_a_table_and_as_json(fake_api):
    tenant = str(uuid.uuid4())
    fake_api.deliveries += [Delivery("gmail.com", tenant, age=7300) for _ in range(3)]
    fake_api.deliveries += [Delivery("outlook.com", tenant, state="held", held_reason="blocklisted",
                                              code=550, text="5.7.1 blocked")]
    fake_api.holds.append({"id": str(uuid.uuid4()), "kind": "destination", "value": "outlook.com",
                                    "reason": "blocklisted", "created_at": "2026-11-26T11:00:00.000Z",
                                    "created_by": "alice"})
    code, out, _ = await mailsvc("queue", environ=fake(fake_api))
    assert code == 0
    assert re.search(r"^deferred\s+3\s+2h01m$", out, re.M)
    assert re.search(r"^gmail\.com\s+mx\.gmail\.com\s+3\s+0\s+3\s+0\s+0\s+2h01m\s+\S+\s+451 4\.7\.1 try again later ×3",
                     out, re.M)
    assert re.search(r"^outlook\.com\s+.*\s+blocklisted$", out, re.M)
    assert re.search(rf"^{tenant}\s+tenant \S+\s+4\s", out, re.M)
    assert re.search(r"destination\s+outlook\.com\s+blocklisted\s+\S+\s+alice$", out, re.M)

    code, out, _ = await mailsvc("queue", "--json", environ=fake(fake_api))
    assert code == 0 and json.loads(out)["by_destination"][0]["destination"] == "gmail.com"


@pt.ensureDeferred
async def test_queue_list_passes_its_filters_and_pages(fake_api):
    tenant = str(uuid.uuid4())
    fake_api.deliveries += [Delivery("gmail.com", tenant, age=4000) for _ in range(3)]
    fake_api.deliveries += [Delivery("gmail.com", tenant, age=10), Delivery("yahoo.com", tenant)]
    code, out, err = await mailsvc("queue", "list", "--destination", "gmail.com", "--state", "deferred",
                                   "--code", "451", "--older-than", "1h", "--tenant", tenant, "--limit", "2",
                                   environ=fake(fake_api))
    assert code == 0
    assert fake_api.seen[-1].query == {"destination": "gmail.com", "state": "deferred", "code": "451",
                                                "min_age_seconds": "3600", "tenant_id": tenant, "limit": "2"}
    rows = out.splitlines()[1:]
    assert len(rows) == 2 and all("someone@gmail.com" in row for row in rows)
    last = fake_api.deliveries[1].id
    assert f"--after {last}" in err

    code, out, err = await mailsvc("queue", "list", "--destination", "gmail.com", "--older-than", "1h",
                                   "--after", last, "--json", environ=fake(fake_api))
    page = json.loads(out)
    assert [d["id"] for d in page["data"]] == [fake_api.deliveries[2].id] and not page["has_more"]
    assert err == ""


@pt.ensureDeferred
async def test_an_action_above_the_count_asks_first(fake_api):
    tenant = str(uuid.uuid4())
    fake_api.deliveries += [Delivery("gmail.com", tenant) for _ in range(CONFIRM_ABOVE + 2)]
    fake_api.deliveries += [Delivery("yahoo.com", tenant) for _ in range(2)]
    env = fake(fake_api)

    code, out, err = await mailsvc("queue", "bounce", "--destination", "gmail.com", environ=env, stdin="n\n")
    assert code == 1 and "bounce 12 deliveries (destination=gmail.com)? [y/N]" in err
    assert [s.method for s in fake_api.seen] == ["GET"] and len(fake_api.deliveries) == 14
    code, out, _ = await mailsvc("queue", "bounce", "--destination", "gmail.com", environ=env, stdin="")
    assert code == 1 and len(fake_api.deliveries) == 14  # no answer is no

    code, out, _ = await mailsvc("queue", "bounce", "--destination", "gmail.com", environ=env, stdin="y\n")
    assert (code, out) == (0, "bounce: 12 deliveries\n")
    assert fake_api.seen[-1].body == {"destination": "gmail.com"}
    assert len(fake_api.deliveries) == 2

    # At or under the count, or with --yes, nothing is asked (and --yes does not count first).
    fake_api.seen.clear()
    code, out, err = await mailsvc("queue", "retry", "--destination", "yahoo.com", environ=env)
    assert (code, out, err) == (0, "retry: 2 deliveries\n", "")
    fake_api.seen.clear()
    code, out, _ = await mailsvc("queue", "hold", "--tenant", tenant, "--reason", "complaints", "--yes",
                                 environ=env)
    assert code == 0 and [(s.method, s.path) for s in fake_api.seen] == [("POST", "/admin/v1/queue/hold")]
    assert fake_api.seen[-1].body == {"tenant_id": tenant, "reason": "complaints"}
    assert fake_api.holds[0]["kind"] == "tenant"


@pt.ensureDeferred
async def test_actions_by_ids_and_their_refusals(fake_api):
    rows = [Delivery("gmail.com", str(uuid.uuid4()), state="held", held_reason="x") for _ in range(2)]
    fake_api.deliveries += rows
    env = fake(fake_api)
    code, out, _ = await mailsvc("queue", "release", "--id", rows[0].id, "--id", rows[1].id, environ=env)
    assert (code, out) == (0, "release: 2 deliveries\n")
    assert fake_api.seen[-1].body == {"ids": [rows[0].id, rows[1].id]}
    fake_api.seen.clear()
    code, _, err = await mailsvc("queue", "retry", environ=env)
    assert code == 1 and "--id, or at least one filter" in err
    code, _, err = await mailsvc("queue", "retry", "--id", rows[0].id, "--state", "due", environ=env)
    assert code == 1 and "not both" in err
    assert fake_api.seen == []
    with pytest.raises(SystemExit):
        parser().parse_args(["queue", "hold", "--destination", "gmail.com"])  # a hold needs its reason


@pt.ensureDeferred
async def test_tenants_audit_and_tokens(fake_api):
    env = fake(fake_api)
    fake_api.tenants += [
        {"object": "tenant", "id": str(uuid.uuid4()), "name": name, "plan": "free", "status": status,
         "delivery_mode": "direct", "created_at": "2026-11-26T10:00:00.000Z"}
        for name, status in [("Acme", "active"), ("Acme Paused", "paused"), ("Other", "active")]]
    code, out, _ = await mailsvc("tenants", "--search", "acme", "--status", "paused", environ=env)
    assert code == 0 and fake_api.seen[-1].query == {"q": "acme", "status": "paused", "limit": "20"}
    assert [line.split()[1:3] for line in out.splitlines()[1:]] == [["Acme", "Paused"]]
    code, out, _ = await mailsvc("tenants", "--json", environ=env)
    assert [t["name"] for t in json.loads(out)["data"]] == ["Acme", "Acme Paused", "Other"]

    fake_api.deliveries.append(Delivery("gmail.com", str(uuid.uuid4())))
    await mailsvc("queue", "retry", "--destination", "gmail.com", environ=env)
    code, out, _ = await mailsvc("audit", environ=env)
    assert code == 0
    assert re.search(r"^\S+\s+fake operator\s+queue\.retry\s+1\s+\{\"destination\":\"gmail\.com\"\}$", out, re.M)
    code, out, _ = await mailsvc("audit", "--json", "--limit", "5", environ=env)
    assert json.loads(out)["data"][0]["action"] == "queue.retry"

    code, secret, err = await mailsvc("tokens", "create", "alice", environ=env)
    assert code == 0 and secret.startswith("op_") and "shown once" in err
    code, out, _ = await mailsvc("tokens", "list", environ=env)
    token_id = fake_api.tokens[0]["id"]
    assert re.search(rf"^{token_id}\s+alice\s", out, re.M) and secret.strip() not in out
    code, out, _ = await mailsvc("tokens", "revoke", token_id, environ=env)
    assert (code, fake_api.tokens) == (0, [])
    code, _, err = await mailsvc("tokens", "revoke", token_id, environ=env)
    assert code == 1 and "404 not_found" in err


HOSTILE = "4.7.1 \x1b[2J\x1b[H\x1b]0;PWNED\x07 see \u202etxt.exe"


@pt.ensureDeferred
async def test_what_a_remote_server_wrote_is_shown_neutralised_and_kept_as_is_in_json(fake_api):
    """A recipient's MX chose the text of its reply: in the tables it cannot clear the screen,
    set the window's title or reorder the line; ``--json`` keeps it as it is stored."""
    fake_api.deliveries.append(Delivery("evil.example", str(uuid.uuid4()), text=HOSTILE))
    env = fake(fake_api)
    escaped = "451 4.7.1 \\x1b[2J\\x1b[H\\x1b]0;PWNED\\x07 see \\u202etxt.exe"
    for argv in (["queue"], ["queue", "list"]):
        code, out, _ = await mailsvc(*argv, environ=env)
        assert code == 0 and escaped in out, out
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]", out), out
    code, out, _ = await mailsvc("queue", "list", "--json", environ=env)
    assert json.loads(out)["data"][0]["last_response"]["text"] == HOSTILE


@pt.ensureDeferred
async def test_tenant_names_are_shown_neutralised(fake_api):
    names = ["Tab\there", "Acme\u202egnp.exe", "Ac\u200bme", "two\nlines"]
    fake_api.tenants += [
        {"object": "tenant", "id": str(uuid.uuid4()), "name": name, "plan": "free", "status": "active",
         "delivery_mode": "direct", "created_at": "2026-11-26T10:00:00.000Z"} for name in names]
    code, out, _ = await mailsvc("tenants", environ=fake(fake_api))
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()[1:]] == \
        ["Tab\\x09here", "Acme\\u202egnp.exe", "Ac\\u200bme", "two\\x0alines"]
    code, out, _ = await mailsvc("tenants", "--json", environ=fake(fake_api))
    assert [t["name"] for t in json.loads(out)["data"]] == names


# -- mailsvc doctor ---------------------------------------------------------------------------


HOST = "mail.example.com"


def write_config(tmp_path, cert_pem: bytes, key_pem: bytes, **sections) -> Path:
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    lines = [f"[state]\ndir = {tmp_path}", f"[mail]\nhostname = {HOST}",
             f"[tls]\ncert = {tmp_path / 'cert.pem'}\nkey = {tmp_path / 'key.pem'}"]
    lines += [f"[{name}]\n" + "\n".join(f"{k} = {v}" for k, v in values.items()) for name, values in sections.items()]
    path = tmp_path / "mailsvc.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


def findings(out: str) -> dict[str, list[str]]:
    """Each subject's status lines (``ok``, ``FAIL``, ``skip``), in order."""
    found: dict[str, list[str]] = {}
    for match in re.finditer(r"^(ok|FAIL|skip)\s+([^:]+): (.*)\n\s+why: \S", out, re.M):
        found.setdefault(match[2], []).append(f"{match[1]} {match[3]}")
    return found


@pt.ensureDeferred
async def test_doctor_passes_on_a_node_set_up_right(api, dns_server, smtp_sink, tmp_path):
    dns_server.a(HOST, "127.0.0.1")
    dns_server.add("1.0.0.127.in-addr.arpa", dns.Record_PTR(HOST, ttl=60))
    dns_server.txt(f"spf.{HOST}", "v=spf1 ip4:127.0.0.0/8 -all")
    pem = ThrowawayCA().server_pem(HOST)
    key_pem, cert_pem = pem.split(b"-----BEGIN CERTIFICATE-----")
    conf = write_config(tmp_path, b"-----BEGIN CERTIFICATE-----" + cert_pem, key_pem)

    code, out, err = await mailsvc("doctor", "--config", str(conf), "--dns-server", dns_server.address,
                                   "--smtp-probe", f"127.0.0.1:{smtp_sink.port}", environ=node(api))
    assert (code, err) == (0, "All checks passed.\n"), out
    seen = findings(out)
    assert seen["mail.hostname"] == [f"ok {HOST} resolves to 127.0.0.1 (this node)"]
    assert seen["reverse DNS"] == [f"ok 127.0.0.1 names {HOST} back (forward-confirmed)"]
    assert seen["SPF include"] == [f"ok spf.{HOST}: v=spf1 ip4:127.0.0.0/8 -all"]
    assert seen["return-path MX"][0].startswith("ok")
    assert [s.split()[0] for s in seen["TLS certificate"]] == ["ok", "ok"]
    assert seen["database"][0].startswith("ok reachable and migrated")
    assert seen["spamd"] == ["skip not configured (spam.spamd)"]
    assert seen["AI provider"] == ["skip not configured (ai.provider)"]
    assert seen["outbound port 25"] == [f"ok 127.0.0.1:{smtp_sink.port} answered EHLO with 250"]

    # Port 25 is never tried unless a host is named.
    code, out, _ = await mailsvc("doctor", "--config", str(conf), "--dns-server", dns_server.address, "--json",
                                 environ=node(api))
    port25 = [f for f in json.loads(out) if f["subject"] == "outbound port 25"]
    assert code == 0 and port25[0]["status"] == "skip"


@pt.ensureDeferred
async def test_doctor_says_what_to_fix_and_why(api, dns_server, tmp_path):
    # Resolves here, but no PTR and no SPF record; a self-signed certificate for another name,
    # about to expire; spamd and the AI provider configured where nothing answers.
    dns_server.a(HOST, "127.0.0.1")
    cert_pem, key_pem = self_signed("other.example.com", valid_days=5)
    not_spamd = api.port.getHost().port  # the node's HTTP port
    conf = write_config(tmp_path, cert_pem, key_pem, spam={"spamd": f"127.0.0.1:{not_spamd}", "timeout": 1},
                        ai={"provider": "openai", "base_url": f"{api.url}/no-ai/v1"})
    code, out, err = await mailsvc("doctor", "--config", str(conf), "--dns-server", dns_server.address,
                                   environ=node(api))
    assert code == 1 and err == "7 to fix.\n", out
    seen = findings(out)
    assert seen["reverse DNS"] == [f"FAIL 127.0.0.1 has no PTR record: ask whoever owns the address (the hosting "
                                   f"provider) to set its PTR to {HOST}"]
    assert seen["SPF include"][0].startswith(f"FAIL spf.{HOST} has no SPF record: publish one TXT record")
    assert [s.split()[0] for s in seen["TLS certificate"]] == ["FAIL", "FAIL", "FAIL"]
    assert "names other.example.com, localhost, not mail.example.com" in seen["TLS certificate"][0]
    assert "self-signed" in seen["TLS certificate"][1] and "expires in 4 days" in seen["TLS certificate"][2]
    assert seen["spamd"][0].startswith(f"FAIL 127.0.0.1:{not_spamd} answered")
    assert seen["AI provider"] == [f"FAIL GET {api.url}/no-ai/v1/models answered 404"]
    assert seen["database"][0].startswith("ok")

    # A name pointing elsewhere; a node that does not answer.
    dns_server.remove(HOST)
    dns_server.a(HOST, "192.0.2.10")
    environ = {"MAILSVC_URL": "http://127.0.0.1:9", "MAILSVC_OPERATOR_TOKEN": "op_x"}
    code, out, _ = await mailsvc("doctor", "--config", str(conf), "--dns-server", dns_server.address,
                                 environ=environ)
    seen = findings(out)
    assert code == 1
    assert seen["mail.hostname"] == [f"FAIL {HOST} resolves to 192.0.2.10, none of them an address of this node: "
                                     "point it here (behind NAT, at the public address of this node)"]
    assert seen["return-path MX"][0].startswith("FAIL")
    assert seen["node"][0].startswith("FAIL cannot reach http://127.0.0.1:9")


@pt.ensureDeferred
async def test_doctor_finds_a_hostname_that_is_not_fully_qualified(dns_server, tmp_path):
    cert_pem, key_pem = self_signed("mailhost")
    conf = write_config(tmp_path, cert_pem, key_pem)
    conf.write_text(conf.read_text().replace(f"hostname = {HOST}", "hostname = mailhost"))
    code, out, _ = await mailsvc("doctor", "--config", str(conf), "--dns-server", dns_server.address,
                                 environ={"MAILSVC_URL": "http://127.0.0.1:9", "MAILSVC_OPERATOR_TOKEN": "op_x"})
    assert code == 1
    assert findings(out)["mail.hostname"] == [
        "FAIL 'mailhost' is not a fully qualified public name: set mail.hostname to one (mail.example.com)"]


@pt.ensureDeferred
async def test_the_queue_tenants_audit_and_tokens_verbs_against_the_real_routes(api):
    """The fake above follows the contract; this checks the verbs read what the node really answers."""
    created, _ = await api.tenant(name="Acme Real")
    env = node(api)
    code, out, _ = await mailsvc("queue", "--json", environ=env)
    assert code == 0 and json.loads(out)["object"] == "queue_summary"
    code, out, _ = await mailsvc("queue", environ=env)
    assert code == 0
    code, out, _ = await mailsvc("queue", "list", "--destination", "gmail.com", "--json", environ=env)
    assert code == 0 and json.loads(out)["data"] == []
    code, out, err = await mailsvc("queue", "retry", "--destination", "gmail.com", "--yes", environ=env)
    assert code == 0, err
    code, out, _ = await mailsvc("tenants", "--search", "acme real", environ=env)
    assert code == 0 and created["id"] in out
    code, out, _ = await mailsvc("audit", "--json", environ=env)
    assert code == 0 and json.loads(out)["data"][0]["action"] == "queue.retry"
    # Filtered by actor kind and tenant: the tenant's creation (and the rate the helper set).
    code, out, err = await mailsvc("audit", "--actor-kind", "token", "--tenant", created["id"], "--json", environ=env)
    assert code == 0, err
    assert [e["action"] for e in json.loads(out)["data"]] == ["tenant.update", "tenant.create"]
    code, out, _ = await mailsvc("audit", "--actor-kind", "user", "--tenant", created["id"], environ=env)
    assert code == 0 and "tenant." not in out
    with pytest.raises(SystemExit):
        parser().parse_args(["audit", "--actor-kind", "robot"])
    code, secret, _ = await mailsvc("tokens", "create", "alice", environ=env)
    assert code == 0 and secret.strip()
    code, out, _ = await mailsvc("tokens", "list", "--json", environ=env)
    (token,) = [t for t in json.loads(out)["data"] if t["name"] == "alice"]
    code, _, _ = await mailsvc("queue", environ={**env, "MAILSVC_OPERATOR_TOKEN": secret.strip()})
    assert code == 0
    code, _, err = await mailsvc("tokens", "revoke", token["id"], environ=env)
    assert code == 0, err
    code, _, err = await mailsvc("queue", environ={**env, "MAILSVC_OPERATOR_TOKEN": secret.strip()})
    assert code == 1 and "403" in err, err
