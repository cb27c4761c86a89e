"""Where blocking and CPU-bound work runs, off the reactor: the reactor's threads, a pool of processes."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from twisted.internet import defer, threads


def thread_pool_runner(reactor) -> Callable[[Callable[[], Any]], Awaitable[Any]]:
    """Runs a blocking call (password hashing, date parsing, key generation) in the reactor's threads."""

    def run_blocking(fn: Callable[[], Any]) -> Awaitable[Any]:
        return threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn)

    return run_blocking


#: Processes a node's worker process parses stored messages in (the development inbox), each
#: started at its first use.
PARSE_PROCESSES = 2
PARSE_NICENESS = 10


def process_pool_runner(reactor, workers: int = PARSE_PROCESSES) -> Callable[..., Awaitable[Any]]:
    """
    Runs ``fn(*args)`` (a module's function, its arguments and result picklable) in a pool of
    processes: CPU-bound work that a thread would still run under the reactor's GIL (parsing a
    message of 500 parts takes a second). The pool starts at its first use, in a thread (starting
    a process blocks until it runs), and is stopped with the reactor; a pool whose process died
    is started anew.
    """
    pool: list[ProcessPoolExecutor] = []
    starting = threading.Lock()

    def started() -> ProcessPoolExecutor:
        with starting:
            if not pool:
                # spawn: a process started afresh, not a fork of one running a reactor and threads;
                # at a lower priority (nice 10), so that the reactor's process has a core first.
                executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                               initializer=os.nice, initargs=(PARSE_NICENESS,))
                pool.append(executor)
                reactor.callFromThread(reactor.addSystemEventTrigger, "before", "shutdown", executor.shutdown,
                                       wait=False, cancel_futures=True)
            return pool[0]

    def submitted(fn: Callable[..., Any], args: tuple):
        """The future of ``fn(*args)``; called in a thread (the first call starts the processes)."""
        executor = started()
        try:
            return executor.submit(fn, *args)
        except BrokenProcessPool:  # a process of it died: the pool is started anew
            with starting:
                if pool and pool[0] is executor:
                    pool.pop().shutdown(wait=False)
            return started().submit(fn, *args)

    def outcome(future) -> defer.Deferred:
        result: defer.Deferred = defer.Deferred()

        def fire(done) -> None:
            if done.cancelled():
                result.errback(defer.CancelledError())
            elif done.exception() is not None:
                result.errback(done.exception())
            else:
                result.callback(done.result())

        future.add_done_callback(lambda done: reactor.callFromThread(fire, done))
        return result

    def run(fn: Callable[..., Any], *args) -> defer.Deferred:
        if pool:
            try:
                return outcome(pool[0].submit(fn, *args))
            except BrokenProcessPool:
                pass  # started anew in a thread, as the first use is
        return threads.deferToThreadPool(reactor, reactor.getThreadPool(), submitted, fn, args).addCallback(outcome)

    return run

