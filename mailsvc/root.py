"""The node's root service (twistd's, through mailsvc/tap.py): one process serving everything, one
of a parent's workers (mailsvc/node.py's start), or the parent of its workers (mailsvc/parent.py)."""

from __future__ import annotations

import gc
import os

from mailsvc import processes
from mailsvc.config import Config
from mailsvc.node import EXPECTED_FAILURES, start
from mailsvc.parent import runs_workers, start_parent
from mailsvc.service import Node


def build(config: Config, inherited: processes.Inherited | None = None,
          worker_command: list[str] | None = None) -> Node:
    """
    The node: one process serving everything, or (``node.processes`` above 1, a role every
    worker runs, and the ``worker_command`` that starts a worker) the parent of its workers;
    ``inherited``: this process is a worker, serving the sockets its parent opened.
    """
    from twisted.internet import reactor

    def fail(reason: str) -> None:
        # twistd routes sys.stderr into its log; the one-line reason goes to the real stderr.
        os.write(2, f"mailsvc: cannot start: {reason}\n".encode("utf-8", "replace"))
        reactor.addSystemEventTrigger("after", "shutdown", os._exit, 1)
        if reactor.running:
            reactor.stop()
        else:
            reactor.callWhenRunning(reactor.stop)

    if inherited is not None:
        reactor.callWhenRunning(processes.watch_parent, reactor)
    if inherited is None and worker_command is not None and runs_workers(config):
        node = Node(lambda node: start_parent(reactor, config, node, worker_command), fail, EXPECTED_FAILURES)
    else:
        node = Node(lambda node: start(reactor, config, node, inherited), fail, EXPECTED_FAILURES)
    node.ready.addCallback(_freeze_startup_heap)
    return node


def _freeze_startup_heap(node: Node) -> Node:
    """
    Once started, keep the long-lived objects (modules, the assembled parts) out of the cyclic
    collector's scans: full collections otherwise walk them all and stall requests in flight
    (bench/http_auth.py: p99 about halved).
    """
    gc.collect()
    gc.freeze()
    return node
