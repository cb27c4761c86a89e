"""
A loopback SMTP sink that tells which messages arrived and when: the tests' sink
(tests/helpers/smtpsink.py, Twisted's ``LineReceiver``) run as a process of its own, keeping
nothing but a line per accepted message in a log, its arrival time (``time.time()``) and its
``Message-ID`` header. ``smtp-sink -c`` only counts, so it cannot tell a message lost from one
delivered twice; this one lets a benchmark check every accepted e-mail's Message-ID once.

    python -m bench.idsink LOG      # prints its port, then serves until SIGTERM
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.common import ROOT, terminate

#: The Message-ID header's value, folded or not (RFC 5322 3.6.4).
MESSAGE_ID = re.compile(rb"(?im)^message-id:[ \t]*(?:\r\n[ \t]+)?(<[^>\r\n]*>)")


def message_id(data: bytes) -> bytes:
    """The message's Message-ID (b"-" when it has none), read from its header section only."""
    head = data.split(b"\r\n\r\n", 1)[0]
    found = MESSAGE_ID.search(head)
    return found.group(1) if found else b"-"


def serve(log_path: str) -> None:
    """The sink's process: each accepted message a ``<time> <Message-ID>`` line, written every
    0.2 s and at shutdown."""
    from twisted.internet import reactor, task

    from tests.helpers.smtpsink import Sink

    log = open(log_path, "ab")
    pending: list[bytes] = []

    class Logging(Sink):
        def _accepted(self, message) -> None:
            pending.append(b"%.6f %s\n" % (time.time(), message_id(message.data)))

    def flush() -> None:
        if pending:
            log.write(b"".join(pending))
            log.flush()
            pending.clear()

    sink = Logging()
    sink.starttls = False  # as smtp-sink -c: the delivery path measured without TLS
    sink.start()
    task.LoopingCall(flush).start(0.2)
    reactor.addSystemEventTrigger("before", "shutdown", flush)
    print(sink.port, flush=True)
    reactor.run()


class IdSink:
    """The sink process on a loopback port, with bench/delivery.py's ``Sink`` interface (``port``,
    ``count()``, ``stop()``) and the arrivals it logged."""

    def __init__(self, root: Path):
        self.out = root / f"idsink-{os.getpid()}-{time.monotonic_ns()}.log"
        self.out.touch()
        self.process = subprocess.Popen([sys.executable, "-m", "bench.idsink", str(self.out)], cwd=ROOT,
                                        env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline())
        self._read, self._lines = 0, 0

    def count(self) -> int:
        """Messages logged so far (the log read on from where the last call stopped)."""
        with open(self.out, "rb") as f:
            f.seek(self._read)
            chunk = f.read()
        whole = chunk.rfind(b"\n") + 1
        self._read += whole
        self._lines += chunk.count(b"\n", 0, whole)
        return self._lines

    def arrivals(self) -> dict[str, list[float]]:
        """Each Message-ID seen, with the time of each arrival."""
        seen: dict[str, list[float]] = collections.defaultdict(list)
        with open(self.out, "rb") as f:
            for line in f:
                at, mid = line.split()
                seen[mid.decode()].append(float(at))
        return seen

    def stop(self) -> None:
        terminate(self.process)


def check(accepted: list[str], seen: dict[str, list[float]]) -> dict:
    """Every accepted Message-ID seen once? Missing, duplicated (arrivals beyond the first) and
    unexpected (seen, not accepted) counts."""
    wanted = set(accepted)
    return {"accepted": len(accepted), "distinct_accepted": len(wanted),
            "missing": sum(1 for m in wanted if m not in seen),
            "duplicated": sum(len(times) - 1 for m, times in seen.items() if m in wanted),
            "unexpected": sum(len(times) for m, times in seen.items() if m not in wanted)}


if __name__ == "__main__":
    serve(sys.argv[1])
