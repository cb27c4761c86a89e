"""
Throw-away directories for the tests' PostgreSQL clusters and daemons' state, in memory
(``/dev/shm``) where the machine has such a file system, else in the usual temporary directory.

A test's cluster needs no durability, and on disk most of its server's CPU went to writing files:
in a run of tests/integration/test_hostile.py on ext4, each test's ``CREATE DATABASE`` of the migrated template
took 0.56 s of its backend's CPU (docs/benchmarks.md, "The test suite's time").
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

MEMORY = Path("/dev/shm")


def scratch_dir(prefix: str) -> Path:
    """A new directory the embedded cluster's unprivileged owner can reach; the caller removes it."""
    where = MEMORY if MEMORY.is_dir() and os.access(MEMORY, os.W_OK | os.X_OK) else None
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=where))
    root.chmod(0o755)
    return root
