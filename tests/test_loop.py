"""The one runner of background work: its steps, wake-ups and failures, on a fake clock."""

from twisted.internet import defer, task

from mailsvc.loop import Loop


def counting_loop(interval: float = 10):
    clock = task.Clock()
    steps: list[float] = []

    async def step():
        steps.append(clock.seconds())

    loop = Loop(clock, "test loop", interval, step)
    loop.start()
    return clock, loop, steps


def test_steps_every_interval_and_at_once_when_woken():
    clock, loop, steps = counting_loop()
    clock.advance(10)
    assert steps == [10]
    loop.wake()
    clock.advance(0)
    assert steps == [10, 10]
    clock.advance(10)
    assert steps == [10, 10, 20]


def test_wake_ups_within_the_gathering_time_make_one_step():
    clock, loop, steps = counting_loop()
    loop.wake(0.01)
    clock.advance(0.005)
    loop.wake(0.01)  # does not push the step already due back
    loop.wake(0.01)
    assert steps == []
    clock.advance(0.005)
    assert steps == [0.01]
    clock.advance(1)
    assert steps == [0.01]  # then the interval again


def test_a_wake_during_a_step_runs_one_more_right_after():
    clock = task.Clock()
    running: list[defer.Deferred] = []

    def step():
        running.append(defer.Deferred())
        return running[-1]

    loop = Loop(clock, "test loop", 10, step)
    loop.start()
    loop.wake()
    clock.advance(0)
    loop.wake(0.01)
    loop.wake()
    assert len(running) == 1
    running[0].callback(None)
    clock.advance(0)
    assert len(running) == 2

    loop.wake(0.01)  # only gathering wake-ups during this run: the next waits for others
    running[1].callback(None)
    clock.advance(0.005)
    assert len(running) == 2
    clock.advance(0.005)
    assert len(running) == 3


def test_a_failing_step_is_counted_and_the_loop_goes_on():
    clock = task.Clock()
    failures: list[str] = []
    calls: list[float] = []

    async def step():
        calls.append(clock.seconds())
        raise RuntimeError("boom")

    loop = Loop(clock, "failing", 5, step, on_failure=failures.append)
    loop.start()
    clock.advance(5)
    clock.advance(5)
    assert calls == [5, 10] and failures == ["failing", "failing"]
