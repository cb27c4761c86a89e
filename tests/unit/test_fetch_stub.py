"""
The outbound HTTP client driven without a network: treq's RequestSequence answers in place of
the pinned connection, a Clock keeps time. What goes out and what a response is taken for.
"""

import gzip

from treq.testing import RequestSequence, RequestTraversalAgent, StringStubbingResource
from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from mailsvc.outside.addresses import PublicAddresses, TargetRefused
from mailsvc.outside.fetch import USER_AGENT, Fetcher, FetchFailed


def sent(*extra: tuple[bytes, bytes]) -> dict:
    """The headers a request carries: ours, the gzip decoder's, and the stub agent's (Host, Connection)."""
    headers = {b"User-Agent": [USER_AGENT.encode()], b"Accept-Encoding": [b"gzip"], b"Host": [b"127.0.0.1"],
               b"Connection": [b"close"]}
    headers.update({name: [value] for name, value in extra})
    return headers


class StubbedFetcher(SynchronousTestCase):
    def fetcher(self, responses, allow_private: bool = True):
        """A fetcher whose every request is answered by ``responses`` in turn."""
        self.sequence = RequestSequence(responses, self.fail)
        self.clock = task.Clock()
        agent = RequestTraversalAgent(StringStubbingResource(self.sequence))
        self.pinned = []

        def agent_for(address, tls, timeout):
            self.pinned.append(str(address))
            return agent

        # Literal addresses need no resolver; private ones are allowed for the loopback stub.
        addresses = PublicAddresses(self.clock, resolver=None, allow_private=allow_private)
        return Fetcher(self.clock, addresses, agent_for=agent_for)

    def test_a_get_sends_our_agent_and_reads_the_body(self):
        fetcher = self.fetcher([
            ((b"get", "https://127.0.0.1/files/a.pdf", {}, sent(), b""),
             (200, {b"Content-Type": b"application/pdf"}, b"%PDF-1.4")),
        ])
        with self.sequence.consume(self.fail):
            fetched = self.successResultOf(defer.ensureDeferred(
                fetcher.get("https://127.0.0.1/files/a.pdf", 1000, 30)))
        self.assertEqual((fetched.status, fetched.headers["content-type"], fetched.body),
                         (200, "application/pdf", b"%PDF-1.4"))
        self.assertEqual(self.pinned, ["127.0.0.1"])

    def test_a_body_over_the_limit_is_refused(self):
        fetcher = self.fetcher([
            ((b"get", "https://127.0.0.1/big", {}, sent(), b""),
             (200, {}, b"x" * 101)),
        ])
        with self.sequence.consume(self.fail):
            failure = self.failureResultOf(defer.ensureDeferred(fetcher.get("https://127.0.0.1/big", 100, 30)),
                                           FetchFailed)
        self.assertEqual(failure.value.reason, "too_large")

    def test_a_redirect_is_not_followed(self):
        fetcher = self.fetcher([
            ((b"get", "https://127.0.0.1/moved", {}, sent(), b""),
             (302, {b"Location": b"https://127.0.0.1/elsewhere"}, b"")),
        ])
        with self.sequence.consume(self.fail):
            failure = self.failureResultOf(defer.ensureDeferred(fetcher.get("https://127.0.0.1/moved", 100, 30)),
                                           FetchFailed)
        self.assertEqual(failure.value.reason, "redirect")

    def test_a_post_carries_its_body_and_headers(self):
        headers = sent((b"Webhook-Id", b"msg_1"), (b"Content-Length", b"21"))
        expected = (b"post", "https://127.0.0.1/hook", {}, headers, b'{"type":"email.sent"}')
        fetcher = self.fetcher([(expected, (204, {}, b""))])
        with self.sequence.consume(self.fail):
            fetched = self.successResultOf(defer.ensureDeferred(fetcher.post(
                "https://127.0.0.1/hook", b'{"type":"email.sent"}', {"Webhook-Id": "msg_1"}, 100, 30)))
        self.assertEqual(fetched.status, 204)

    def test_a_gzipped_answer_is_read_decoded(self):
        compressed = gzip.compress(b'{"ok":true}')
        fetcher = self.fetcher([
            ((b"post", "https://127.0.0.1/hook", {}, sent((b"Content-Length", b"2")), b"{}"),
             (200, {b"Content-Encoding": b"gzip"}, compressed)),
        ])
        with self.sequence.consume(self.fail):
            fetched = self.successResultOf(defer.ensureDeferred(
                fetcher.post("https://127.0.0.1/hook", b"{}", {}, 100, 30)))
        self.assertEqual((fetched.status, fetched.body), (200, b'{"ok":true}'))

    def test_a_private_address_is_refused_before_anything_is_sent(self):
        fetcher = self.fetcher([], allow_private=False)
        self.failureResultOf(defer.ensureDeferred(fetcher.get("https://127.0.0.1/x", 100, 30)), TargetRefused)
        self.assertEqual(self.pinned, [])
