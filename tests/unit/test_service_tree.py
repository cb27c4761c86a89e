"""The node's service tree (mailsvc.service): each child started in order and awaited, the
loops and leased engines started and stopped as services, the stops in reverse order."""

from __future__ import annotations

from twisted.internet import defer, task

from mailsvc import compose
from mailsvc.engine import LeasedEngine
from mailsvc.loop import Loop
from mailsvc.service import Group, Node, Part, start


class Engine(LeasedEngine):
    desc = "test engine"
    role = "delivery"
    channel = "test_channel"

    def __init__(self, clock, order: list[str]):
        super().__init__(clock, "test engine step", 10)
        self.order = order
        self.steps = 0

    async def step(self) -> None:
        self.steps += 1

    async def stop(self) -> None:
        await self._stop_claiming()
        self.order.append("engine stopped")


class Notifications:
    def __init__(self, order: list[str]):
        self.order = order
        self.listening: dict[str, object] = {}
        self.waiting = defer.Deferred()

    async def listen(self, channel: str, callback) -> None:
        await self.waiting  # the engine must not start before its LISTEN is there
        self.listening[channel] = callback
        self.order.append(f"LISTEN {channel}")


def tree(clock, order: list[str]):
    notifications = Notifications(order)
    engine = Engine(clock, order)
    loop = Loop(clock, "test loop", 5, lambda: defer.succeed(order.append("loop step")))
    root = Group("background", [
        Part("connection", stop=lambda: order.append("connection stopped")),
        Group("feature", [loop, compose.woken(notifications, engine)]),
    ])
    return root, notifications, engine, loop


def test_the_tree_starts_its_loops_and_engines_after_their_listen_and_stops_them_in_reverse():
    clock, order = task.Clock(), []
    root, notifications, engine, loop = tree(clock, order)
    starting = defer.ensureDeferred(start(root))
    assert loop.running and not engine.running and not starting.called  # waiting for the LISTEN
    notifications.waiting.callback(None)
    assert starting.called and engine.running
    assert notifications.listening == {"test_channel": engine.notified}
    clock.advance(0)
    assert engine.steps == 1  # an engine steps at its start
    clock.advance(5)
    assert order == ["LISTEN test_channel", "loop step"]

    stopping = root.stopService()
    assert stopping.called
    assert order[2:] == ["engine stopped", "connection stopped"]
    assert not engine.running and not loop.running
    clock.advance(60)
    assert engine.steps == 1 and order.count("loop step") == 1  # nothing runs once stopped


def test_a_loop_a_test_started_by_itself_is_stopped_with_the_tree():
    clock, order = task.Clock(), []
    root, _, engine, loop = tree(clock, order)
    loop.start()
    root.stopService()
    assert not loop.running
    assert order == []  # neither the engine nor the connection ran: nothing else to stop
    clock.advance(60)
    assert order == []


def test_the_node_adds_each_part_once_started_and_undoes_them_in_reverse():
    clock, order = task.Clock(), []
    root, notifications, engine, loop = tree(clock, order)
    notifications.waiting.callback(None)

    async def start_node(node: Node) -> None:
        node.on_stop("store", lambda: order.append("store stopped"))
        await node.add(root)
        node.on_stop("listener", lambda: order.append("listener stopped"))

    node = Node(start_node, lambda reason: None)
    node.startService()
    assert node.ready.called and engine.running and loop.running
    node.stopService()
    assert order[-4:] == ["listener stopped", "engine stopped", "connection stopped", "store stopped"]
