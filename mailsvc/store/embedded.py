"""
The embedded default store: a private PostgreSQL cluster in the state directory, reached over
a Unix socket in a directory only its owner can enter. PostgreSQL refuses to run as root, so
when we are root the cluster belongs to an unprivileged system user (created if missing).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

from twisted.internet import threads
from twisted.logger import Logger

log = Logger()

CLUSTER_USER = "mailsvc"
DATABASE = "mailsvc"

#: For throw-away clusters (tests, benchmarks): durability traded for speed.
FAST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class ClusterError(Exception):
    pass


def find_bindir(configured: str = "") -> Path:
    """The directory holding initdb/pg_ctl: configured, else the newest Debian install, else PATH."""
    if configured:
        return Path(configured)
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise ClusterError("PostgreSQL server binaries (initdb) not found; install postgresql")


def ensure_cluster_user(name: str = CLUSTER_USER) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(name)


class EmbeddedCluster:
    def __init__(
        self,
        reactor,
        root: Path,
        bindir: Path,
        settings: dict[str, str] | None = None,
    ):
        self._reactor = reactor
        self._root = Path(root)
        self._bindir = Path(bindir)
        self._settings = dict(settings or {})
        self._started_here = False
        self._owner: pwd.struct_passwd | None = None

    @property
    def data_dir(self) -> Path:
        return self._root / "data"

    @property
    def socket_dir(self) -> Path:
        return self._root / "run"

    @property
    def dsn(self) -> str:
        user = self._owner.pw_name if self._owner else pwd.getpwuid(os.geteuid()).pw_name
        return f"host={self.socket_dir} dbname={DATABASE} user={user}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        owner = self._owner
        kwargs: dict[str, Any] = {}
        if owner is not None and os.geteuid() != owner.pw_uid:
            kwargs = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        env = dict(os.environ, LC_ALL="C.UTF-8", HOME=str(self._root))
        done = subprocess.run(
            [str(self._bindir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            cwd=self._root,
            env=env,
            **kwargs,
        )
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise ClusterError(f"{args[0]} failed: {detail[-1] if detail else done.returncode}")
        return done

    def _prepare(self) -> None:
        self._owner = ensure_cluster_user() if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
        for path in (self._root, self.socket_dir):
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chown(path, self._owner.pw_uid, self._owner.pw_gid)
            os.chmod(path, 0o700)
        if not (self.data_dir / "PG_VERSION").exists():
            if self.data_dir.exists():
                shutil.rmtree(self.data_dir)  # a half-made cluster from an interrupted initdb
            self._run(
                "initdb",
                "-D", str(self.data_dir),
                "-U", self._owner.pw_name,
                "--auth=trust",
                "-E", "UTF8",
                "--locale=C.UTF-8",
            )
            settings = {
                "listen_addresses": "''",
                "unix_socket_directories": f"'{self.socket_dir}'",
                "max_connections": "200",
            }
            settings.update({k: v for k, v in self._settings.items()})
            with open(self.data_dir / "postgresql.auto.conf", "a", encoding="utf-8") as f:
                for key, value in settings.items():
                    f.write(f"{key} = {value}\n")
            self._start_server()
            self._run("createdb", "-h", str(self.socket_dir), "-U", self._owner.pw_name, DATABASE)
            return
        running = self._run("pg_ctl", "-D", str(self.data_dir), "status", check=False)
        if running.returncode == 0:
            log.info("embedded PostgreSQL already running in {dir}; reusing it", dir=self.data_dir)
            return
        self._start_server()

    def _start_server(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data_dir), "-l", str(self._root / "postgresql.log"),
            "-w", "-t", "60", "start",
        )
        self._started_here = True

    def _stop(self) -> None:
        if self._started_here:
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop", check=False)
            self._started_here = False

    async def start(self) -> str:
        """Create the cluster if needed, start it, and return the DSN to reach it."""
        await threads.deferToThreadPool(self._reactor, self._reactor.getThreadPool(), self._prepare)
        return self.dsn

    async def stop(self) -> None:
        await threads.deferToThreadPool(self._reactor, self._reactor.getThreadPool(), self._stop)

    def start_now(self) -> str:
        """Blocking ``start``, for test fixtures outside a running reactor."""
        self._prepare()
        return self.dsn

    def stop_now(self) -> None:
        """Blocking stop, for test fixtures outside a running reactor."""
        self._stop()

    def crash_now(self) -> None:
        """Stop the server at once, as if its machine died: no checkpoint, crash recovery at
        the next start (the drills' way to lose a database under a node)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop", check=False)
