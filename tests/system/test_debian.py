"""The .deb: built, installed, run with the unit's command line, sending e-mail to a sink, removed and purged
(scripts/deb-install-test)."""

import contextlib
import os
import subprocess
from pathlib import Path

import psycopg2
import pytest

#: It runs beside the system tier's other tests, on one of their workers: none of them uses the
#: package's paths (/etc/mailsvc, /var/lib/mailsvc, /opt/mailsvc) or dpkg, and it times nothing.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: What a build in the checkout would leave there (the script builds in a temporary copy).
BUILD_LEFTOVERS = ("debian/mailsvc", "debian/build-wheel", "debian/.debhelper", "debian/files",
                   "debian/debhelper-build-stamp", "debian/mailsvc.substvars")


def _checkout_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.timeout(900)  # a package build and install beside the other system tests on two cores
def test_the_package_installs_sends_mail_and_purges_cleanly(pg_dsn):
    # scripts/test installs dpkg-dev and debhelper (as root, as CI runs it): never skipped.
    assert os.geteuid() == 0, "the package test installs a .deb: run scripts/test as root"
    # The suite's PostgreSQL cluster is up, run by the mailsvc user (as root): the package's
    # purge must leave that user, and so the cluster, alone.
    with contextlib.closing(psycopg2.connect(pg_dsn)) as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
    user_before = subprocess.run(["getent", "passwd", "mailsvc"], capture_output=True, text=True).stdout
    assert user_before, "the embedded cluster runs as the mailsvc user"
    leftovers_before = {p for p in BUILD_LEFTOVERS if (ROOT / p).exists()}
    parent_debs_before = set(ROOT.parent.glob("mailsvc_*"))
    checkout_before = _checkout_state()

    run = subprocess.run([str(ROOT / "scripts" / "deb-install-test")], capture_output=True, text=True, timeout=900)
    print(run.stdout[-5000:])  # what it measured (pytest -rP shows it)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
    assert "deb install test: ok" in run.stdout
    # One e-mail through POST /emails and one through SMTP submission reached the sink, each with
    # its DKIM signatures verified by dkimpy (tests/helpers/deb_send.py).
    assert "sent: 2" in run.stdout.splitlines()
    assert run.stdout.count("verified by dkimpy") == 2
    assert "purge kept the mailsvc user it did not create" in run.stdout

    assert subprocess.run(["getent", "passwd", "mailsvc"], capture_output=True, text=True).stdout == user_before
    with contextlib.closing(psycopg2.connect(pg_dsn)) as conn, conn.cursor() as cur:  # the cluster still serves
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    assert subprocess.run(["dpkg", "-s", "mailsvc"], capture_output=True).returncode != 0  # nothing installed
    # Nothing written into the checkout, nor beside it.
    assert {p for p in BUILD_LEFTOVERS if (ROOT / p).exists()} == leftovers_before
    assert set(ROOT.parent.glob("mailsvc_*")) == parent_debs_before
    assert _checkout_state() == checkout_before
