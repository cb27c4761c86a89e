"""Whose turn is next at a destination: transactional mail ahead of a broadcast's, each in order."""

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from mailsvc.delivery.shaping import Shaper
from mailsvc.delivery.turns import Turns
from mailsvc.domain.shaping import Limits


class TurnsTests(SynchronousTestCase):
    def test_waiters_ahead_go_first_each_in_the_order_they_came(self):
        turns = Turns(1)
        self.successResultOf(turns.acquire())
        started = []
        for name, ahead in [("b1", False), ("t1", True), ("b2", False), ("t2", True)]:
            turns.acquire(ahead).addCallback(lambda _, name=name: started.append(name))
        for _ in range(4):
            turns.release()
        self.assertEqual(started, ["t1", "t2", "b1", "b2"])
        self.assertEqual(turns.tokens, 0)
        turns.release()
        self.assertEqual(turns.tokens, 1)

    def test_a_cancelled_wait_leaves_its_place(self):
        turns = Turns(1)
        self.successResultOf(turns.acquire())
        gone = turns.acquire(ahead=True)
        kept = turns.acquire()
        gone.cancel()
        self.failureResultOf(gone, defer.CancelledError)
        self.assertEqual(len(turns.waiting), 1)
        turns.release()
        self.assertIs(self.successResultOf(kept), turns)


def test_a_shaped_destination_starts_transactional_mail_first():
    clock = task.Clock()
    shaper = Shaper(clock, None, "node-a", Limits(1, 0))  # one at a time, no rate
    held = defer.ensureDeferred(shaper.acquire("mx.example.net", deadline=1000))
    assert held.called
    broadcast = defer.ensureDeferred(shaper.acquire("mx.example.net", deadline=1000))
    transactional = defer.ensureDeferred(shaper.acquire("mx.example.net", deadline=1000, ahead=True))
    shaper.release("mx.example.net")
    assert transactional.called and not broadcast.called
    shaper.release("mx.example.net")
    assert broadcast.called
