"""
The package as an operator installs it: the wheel built from this checkout, installed into a
throw-away virtualenv, runs ``twistd mailsvc`` with no checkout on the path.
"""

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import requests

from tests.helpers.daemon import free_port, wait_until_listening

ROOT = Path(__file__).resolve().parents[2]


def build_and_install(where: Path) -> Path:
    """The wheel built from the checkout into ``where/dist`` and installed into ``where/venv``; the wheel."""
    # Built and installed as an operator would, without the checkout on the path: with it
    # there (scripts/test puts it there), the venv came out without the plugin file.
    env = outside_the_checkout()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(where / "dist"),
                    str(ROOT)], check=True, cwd=where, env=env)
    (wheel,) = (where / "dist").glob("mailsvc-*.whl")
    # The suite's pip installs into the new venv (no pip of its own to bootstrap there), without
    # compiling every module of every dependency: what the package installs and runs is the same.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where / "venv")], check=True, env=env)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(where / "venv" / "bin" / "python"), "install", "-q",
                    "--no-compile", str(wheel)], check=True, cwd=where, env=env)
    return wheel


@contextlib.contextmanager
def locked(path: Path):
    with open(path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield lock


@pytest.fixture(scope="module")
def installed(testrun_uid, worker_id, tmp_path_factory):
    """
    A virtualenv with the built wheel (and its dependencies from the index) installed, once for
    the run: the pytest-xdist workers that run these tests share it (the first builds it, under a
    lock; the last to be done removes it). Readable by all (the node's cluster runs as mailsvc);
    the lock and the count of its users are in pytest's temporary directory of the run.
    """
    where = Path(tempfile.gettempdir()) / f"mailsvc-package-{testrun_uid}"
    run = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        run = run.parent  # each xdist worker's base directory is in the run's
    lock, users = run / f"{where.name}.lock", run / f"{where.name}.users"
    with locked(lock):
        if not where.exists():
            where.mkdir(mode=0o755)
            where.chmod(0o755)
            try:
                build_and_install(where)
            except BaseException:
                shutil.rmtree(where, ignore_errors=True)
                raise
        users.write_text(str(int(users.read_text() or 0) + 1) if users.exists() else "1")
    (wheel,) = (where / "dist").glob("mailsvc-*.whl")
    try:
        yield where, wheel
    finally:
        with locked(lock):
            left = int(users.read_text()) - 1
            users.write_text(str(left))
            if left == 0:  # the lock file stays (a worker may be waiting on it): pytest removes it
                shutil.rmtree(where, ignore_errors=True)
                users.unlink()


def outside_the_checkout() -> dict:
    return {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}


def plugin_errors(where: Path) -> str:
    """What Twisted logged while finding the installed plugins (it swallows import errors)."""
    show = ("import sys; from twisted.python import log; log.startLogging(sys.stdout);"
            "from twisted.plugin import getPlugins; from twisted.application.service import IServiceMaker;"
            "print(sorted(p.tapname for p in getPlugins(IServiceMaker)))")
    found = subprocess.run([str(where / "venv" / "bin" / "python"), "-c", show], cwd=where,
                           env=outside_the_checkout(), capture_output=True, text=True, timeout=60)
    plugins = sorted((where / "venv").glob("lib/python*/site-packages/twisted/plugins/*"))
    return f"{found.stdout}{found.stderr}\nplugin files: {[p.name for p in plugins]}"


@pytest.mark.slow
def test_the_wheel_carries_the_plugin_and_the_migrations_and_no_tests(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "twisted/plugins/mailsvc_plugin.py" in names
    assert "twisted/plugins/__init__.py" not in names  # Twisted's own package keeps its __init__
    migrations = sorted((ROOT / "mailsvc" / "store" / "migrations").glob("*.sql"))
    assert migrations and all(f"mailsvc/store/migrations/{p.name}" in names for p in migrations)
    icons = sorted((ROOT / "mailsvc" / "web" / "social").glob("*.png"))
    assert len(icons) == 9 and all(f"mailsvc/web/social/{p.name}" in names for p in icons)
    # The web UI (served at /ui/) travels in the package.
    web = ROOT / "mailsvc" / "web"
    ui = sorted(p.relative_to(web).as_posix() for p in web.rglob("*") if p.suffix in (".html", ".js", ".css", ".svg"))
    assert "pages/domains.js" in ui and "favicon.svg" in ui and all(f"mailsvc/web/{p}" in names for p in ui)
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]
    # The operator's command line is a console script of the wheel.
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "mailsvc = mailsvc.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.slow
def test_the_mailsvc_command_runs_from_the_installed_package(installed):
    where, _ = installed
    run = subprocess.run([str(where / "venv" / "bin" / "mailsvc"), "queue", "list", "--help"], cwd=where,
                         env=outside_the_checkout(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "example:\n  mailsvc queue list" in run.stdout


@pytest.mark.slow
def test_twistd_mailsvc_runs_from_the_installed_package(installed):
    where, _ = installed
    twistd = where / "venv" / "bin" / "twistd"
    helped = subprocess.run([str(twistd), "mailsvc", "--help"], cwd=where, env=outside_the_checkout(),
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--config" in helped.stdout, plugin_errors(where)
    state = where / "state"
    port = free_port()
    env = dict(outside_the_checkout(), MAILSVC_STATE_DIR=str(state),
               MAILSVC_HTTP_LISTEN=f"tcp:{port}:interface=127.0.0.1", MAILSVC_SMTP_SUBMISSION="",
               MAILSVC_SMTP_INBOUND="tcp:0:interface=127.0.0.1")
    daemon = subprocess.Popen([str(twistd), "--nodaemon", "--pidfile=", "mailsvc"], cwd=where, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_listening(url, daemon)
        assert requests.get(url + "/healthz", timeout=10).json() == {"status": "ok"}
        # The code that answers is the installed one, not this checkout's.
        python = str(where / "venv" / "bin" / "python")
        probe = subprocess.run([python, "-c", "import mailsvc; print(mailsvc.__file__)"],
                               cwd=where, env=outside_the_checkout(), capture_output=True, text=True, check=True)
        assert probe.stdout.startswith(str(where / "venv"))
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
    # twistd ends by re-raising the signal it stopped on (systemd counts SIGTERM as clean).
    out, err = daemon.communicate()
    assert daemon.returncode in (0, -signal.SIGTERM) and "Server Shut Down" in out + err, err
