"""
PostgreSQL clusters of a test's own, made with Debian's binaries on loopback ports and run as
the ``mailsvc`` system user, as the embedded store runs its own (PostgreSQL refuses root):
the failover test's primary and replica, the restore drill's archived cluster and its restore.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from mailsvc.store.embedded import find_bindir
from tests.helpers.daemon import free_port

#: Throw-away clusters: no fsync; ``synchronous_commit`` stays on (commits wait for a sync replica).
FAST = dict(listen_addresses="'127.0.0.1'", unix_socket_directories="''", max_connections="100",
            fsync="off", full_page_writes="off", wal_level="replica", hot_standby="on")


class Cluster:
    """One PostgreSQL server in ``root/name``, owned by the ``mailsvc`` user (root cannot run it)."""

    def __init__(self, root: Path, name: str):
        self.bindir = find_bindir()
        self.dir = root / name
        self.data = self.dir / "data"
        self.log = self.dir / "postgresql.log"
        self.port = free_port()
        self.owner = pwd.getpwnam("mailsvc") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
        self.dir.mkdir(mode=0o700)
        os.chown(self.dir, self.owner.pw_uid, self.owner.pw_gid)

    def command(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """Runs ``argv`` as the owner, in the cluster's directory."""
        kwargs = {}
        if os.geteuid() != self.owner.pw_uid:
            kwargs = {"user": self.owner.pw_uid, "group": self.owner.pw_gid, "extra_groups": []}
        done = subprocess.run(argv, capture_output=True, text=True, cwd=self.dir,
                              env=dict(os.environ, LC_ALL="C.UTF-8", HOME=str(self.dir)), **kwargs)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv[0]} failed: {done.stderr or done.stdout}")
        return done

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Runs one of PostgreSQL's programs (``initdb``, ``pg_ctl``, ...) as the owner."""
        return self.command([str(self.bindir / args[0]), *args[1:]], check)

    def initdb(self, **settings: str) -> None:
        """A new cluster with ``settings`` (and a port of its own) and a database ``mailsvc``."""
        user = self.owner.pw_name
        self.run("initdb", "-D", str(self.data), "-U", user, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
        self.configure(port=str(self.port), **settings)
        self.start()
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", user, "mailsvc")

    def configure(self, **settings: str) -> None:
        with open(self.data / "postgresql.auto.conf", "a") as f:
            for key, value in settings.items():
                f.write(f"{key} = {value}\n")

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def dsn(self, dbname: str = "mailsvc") -> str:
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user={self.owner.pw_name}"
