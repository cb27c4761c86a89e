"""What the benchmarks share: free ports and the CPU time of the processes they measure."""

from __future__ import annotations

import os
import socket
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by ``pids`` (from /proc)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def postgres_pids(data_dir: Path) -> list[int]:
    """The postmaster and its children (the backends serving the node's pool)."""
    try:
        postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    pids = [postmaster]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                pids.append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return pids
