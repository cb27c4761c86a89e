"""The pool of parsing processes: real processes, started at first use and anew when one dies."""

import os
import signal
from concurrent.futures.process import BrokenProcessPool

import pytest
import pytest_twisted as pt
from twisted.internet import reactor

from mailsvc import runners


@pt.ensureDeferred
@pytest.mark.timeout(60)
async def test_a_pool_whose_process_died_is_started_anew():
    run = runners.process_pool_runner(reactor, workers=1)
    first = await run(os.getpid)
    assert first != os.getpid()  # another process, not this one
    assert await run(os.getpid) == first  # the same process, kept
    os.kill(first, signal.SIGKILL)
    # A call under way when the process died fails; the pool is started anew for the next.
    outcomes = []
    while len(outcomes) < 3 and not any(isinstance(o, int) for o in outcomes):
        try:
            outcomes.append(await run(os.getpid))
        except BrokenProcessPool as failed:
            outcomes.append(failed)
    second = outcomes[-1]
    assert isinstance(second, int), outcomes
    assert second not in (first, os.getpid())
    assert await run(os.nice, 0) == runners.PARSE_NICENESS  # started as the first was
