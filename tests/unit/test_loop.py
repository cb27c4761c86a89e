"""The one runner of background work: its steps, wake-ups and failures, on a fake clock; and the
leased engines' shared shape built on it."""

from twisted.internet import defer, task

from mailsvc.engine import LeasedEngine
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


# The leased engines' shared shape, on a lease source of the test's (rows taken by a holder
# until given back) and a fake clock.


class Rows:
    def __init__(self, n: int):
        self.free = list(range(n))
        self.holder: dict[int, object] = {}

    def claim(self, holder, room: int) -> list[int]:
        taken, self.free = self.free[:max(room, 0)], self.free[max(room, 0):]
        self.holder.update(dict.fromkeys(taken, holder))
        return taken

    def give_back(self, rows: list[int]) -> None:
        for row in rows:
            del self.holder[row]
        self.free.extend(rows)


class Sender(LeasedEngine):
    """Claims up to ``room`` rows a step; each is sent until the test fires its Deferred."""

    desc = "test engine"
    role = "test"
    channel = "test"
    notify_gather = 0.01

    def __init__(self, clock, rows: Rows, room: int = 2, drain_cancels: bool = False):
        super().__init__(clock, "send test rows", 10)
        self.rows = rows
        self.room = room
        self.drain_cancels = drain_cancels
        self.steps: list[float] = []
        self.sending: dict[int, defer.Deferred] = {}

    async def step(self) -> None:
        self.steps.append(self._clock.seconds())
        for row in self.rows.claim(self, 0 if self._stopping else self.room - len(self._in_flight)):
            self.sending[row] = defer.Deferred(lambda _, row=row: self.rows.give_back([row]))
            self._track(row, self.sending[row], row, wake=True)

    async def stop(self) -> None:
        await self._stop_claiming()
        self.rows.give_back(await self._drain(5, cancel=self.drain_cancels))

    # What a real engine does from its step (plan the step for its next due row; count its
    # work), here for the test to call: the base class gives these to its subclasses only.

    def plan(self, at: float | None) -> None:
        self._wake_at(at)

    def planned(self) -> float | None:
        return self._wake_planned()

    @property
    def in_flight(self) -> list[int]:
        """The rows being sent (their work not landed yet)."""
        return sorted(self._in_flight)


def test_an_engine_steps_at_start_then_on_notify_after_gathering():
    clock = task.Clock()
    engine = Sender(clock, Rows(0))
    engine.start()
    clock.advance(0)
    assert engine.steps == [0]
    engine.notified()
    engine.notified()
    clock.advance(0.005)
    assert engine.steps == [0]
    clock.advance(0.005)
    assert engine.steps == [0, 0.01]


def test_an_engine_may_wait_for_its_interval_at_start():
    clock = task.Clock()
    engine = Sender(clock, Rows(0))
    engine.step_at_start = False
    engine.start()
    clock.advance(0)
    assert engine.steps == []
    clock.advance(10)
    assert engine.steps == [10]


def test_work_landing_frees_room_and_wakes_a_step():
    clock = task.Clock()
    rows = Rows(3)
    engine = Sender(clock, rows)
    engine.start()
    clock.advance(0)
    assert sorted(engine.sending) == [0, 1] and rows.free == [2]
    engine.sending[0].callback(None)
    clock.advance(0)
    assert engine.steps == [0, 0] and engine.in_flight == [1, 2]


def test_a_planned_wake_replaces_the_last_and_none_is_planned_while_stopping():
    clock = task.Clock()
    engine = Sender(clock, Rows(0))
    engine.start()
    clock.advance(0)
    engine.plan(7)
    engine.plan(3)
    assert engine.planned() == 3
    clock.advance(3)
    assert engine.steps == [0, 3] and engine.planned() is None
    engine.plan(1)  # already past: at once
    clock.advance(0)
    assert engine.steps == [0, 3, 3]
    engine.plan(6)
    defer.ensureDeferred(engine.stop())
    assert engine.planned() is None
    engine.plan(8)
    assert engine.planned() is None


def test_a_stop_waits_for_work_then_gives_back_what_still_runs():
    clock = task.Clock()
    rows = Rows(2)
    engine = Sender(clock, rows)
    engine.start()
    clock.advance(0)
    stopped = defer.ensureDeferred(engine.stop())
    engine.sending[0].callback(None)
    clock.advance(4)
    assert not stopped.called
    clock.advance(1)
    # Row 0 was sent (its outcome is the engine's own business); row 1 is given back.
    assert stopped.called and rows.free == [1] and rows.holder == {0: engine}
    assert engine.steps == [0]  # no step after the stop, however the work landed


def test_a_stop_that_cancels_waits_for_the_work_to_give_itself_back():
    clock = task.Clock()
    rows = Rows(2)
    engine = Sender(clock, rows, drain_cancels=True)
    engine.start()
    clock.advance(0)
    stopped = defer.ensureDeferred(engine.stop())
    clock.advance(5)
    assert stopped.called and sorted(rows.free) == [0, 1] and not engine.in_flight


def test_engines_in_one_process_lease_disjoint_rows():
    clock = task.Clock()
    rows = Rows(5)
    first, second = Sender(clock, rows), Sender(clock, rows)
    first.start()
    second.start()
    clock.advance(0)
    assert set(first.sending).isdisjoint(second.sending) and len(rows.holder) == 4
    defer.ensureDeferred(first.stop())
    clock.advance(5)
    assert sorted(rows.free) == [*sorted(first.sending), 4] and set(rows.holder) == set(second.sending)
