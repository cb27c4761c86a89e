"""
The outbound connection pool's deadline, on a Clock: a transaction whose deadline comes while
it waits for a connection, or while one is being opened, ends in TooLate, never in a
connection failure that would mark the host bad.
"""

from twisted.internet import defer, error, task
from twisted.trial.unittest import SynchronousTestCase

from mailsvc.delivery.connections import ConnectFailed, Connections, Destination, TooLate

MX = Destination("mx.example.net", 25, "opportunistic")


class Deadline(SynchronousTestCase):
    def test_a_connection_attempt_cancelled_at_the_deadline_is_too_late(self):
        clock = task.Clock()

        def connect(destination):
            # As an endpoint's attempt does: cancelling it fails with its own error.
            return defer.Deferred(lambda d: d.errback(error.ConnectingCancelledError(("127.0.0.1", 25))))

        connections = Connections(clock, connect, per_destination=1)
        sending = defer.ensureDeferred(connections.send(MX, "b@x", ["a@example.net"], b"m", deadline=5))
        clock.advance(5)
        self.failureResultOf(sending, TooLate)

    def test_a_wait_for_a_busy_destination_ends_at_the_deadline(self):
        clock = task.Clock()
        connections = Connections(clock, lambda destination: defer.Deferred(), per_destination=1)
        first = defer.ensureDeferred(connections.send(MX, "b@x", ["a@example.net"], b"m", deadline=100))
        waiting = defer.ensureDeferred(connections.send(MX, "b@x", ["c@example.net"], b"m", deadline=5))
        clock.advance(5)
        self.failureResultOf(waiting, TooLate)
        self.assertNoResult(first)

    def test_nothing_starts_past_the_deadline(self):
        clock = task.Clock()
        clock.advance(10)
        opened = []
        connections = Connections(clock, lambda destination: opened.append(destination) or defer.Deferred(),
                                  per_destination=1)
        self.failureResultOf(defer.ensureDeferred(connections.send(MX, "b@x", ["a@x"], b"m", deadline=5)), TooLate)
        self.assertEqual(opened, [])


class Turns(SynchronousTestCase):
    def test_transactional_mail_waits_for_a_busy_destination_ahead_of_a_broadcast(self):
        clock = task.Clock()
        attempts: list[defer.Deferred] = []
        connections = Connections(clock, lambda destination: attempts.append(defer.Deferred()) or attempts[-1],
                                  per_destination=1)
        busy = defer.ensureDeferred(connections.send(MX, "b@x", ["a@example.net"], b"m", deadline=100))
        broadcast = defer.ensureDeferred(connections.send(MX, "b@x", ["c@example.net"], b"m", deadline=100))
        transactional = defer.ensureDeferred(connections.send(MX, "b@x", ["d@example.net"], b"m", deadline=100,
                                                              ahead=True))
        attempts[0].errback(error.ConnectionRefusedError())  # the busy one ends: the next one's turn
        self.failureResultOf(busy, ConnectFailed)
        self.assertEqual(len(attempts), 2)
        attempts[1].errback(error.ConnectionRefusedError())
        self.failureResultOf(transactional, ConnectFailed)  # it came last and went first
        self.assertNoResult(broadcast)
        attempts[2].errback(error.ConnectionRefusedError())
        self.failureResultOf(broadcast, ConnectFailed)
