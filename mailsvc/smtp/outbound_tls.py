"""
STARTTLS and the peer's certificate policy, the outbound client's steps after EHLO and before
AUTH or any transaction (docs/decisions.md, "Outbound SMTP client", "MTA-STS and DANE"):
STARTTLS when offered and TLS options are given, then EHLO again. An ``enforced`` policy that
TLS does not meet ends the session, every recipient deferred ``blocked`` (never bounced).
"""

from __future__ import annotations

from typing import Protocol

from twisted.logger import Logger

from mailsvc.smtp.replies import Reply, Session, SessionDeferral

log = Logger()

OPPORTUNISTIC = "opportunistic"
ENFORCED = "enforced"
TLS_POLICIES = (OPPORTUNISTIC, ENFORCED)


class Securing(Session, Protocol):
    """The client as STARTTLS sees it: it can turn TLS on, and say EHLO again."""

    def start_tls(self, options) -> None:
        """From here the transport encrypts every byte."""

    async def hello(self) -> None:
        """EHLO (HELO if refused), learning the server's extensions."""


class StartTLS:
    """One connection's TLS policy and options, and the peer's policy (MTA-STS or DANE)."""

    def __init__(self, policy: str = OPPORTUNISTIC, options=None, peer_policy=None):
        if policy not in TLS_POLICIES:
            raise ValueError(f"tls_policy must be one of {TLS_POLICIES}")
        if policy == ENFORCED and options is None:
            raise ValueError("an enforced TLS policy needs tls_options")
        self.policy = policy
        self.options = options
        #: ``delivery.policy.PeerPolicy``: ``check()`` → why the server's certificate does not
        #: do (None: it does), ``enforce``, ``report(result)``.
        self.peer_policy = peer_policy

    async def start(self, session: Securing) -> Reply | None:
        """
        TLS up when the server and the policy allow; the server's refusal of STARTTLS when the
        session goes on without it (None otherwise).
        """
        refusal = None
        if "STARTTLS" in session.extensions and self.options is not None and not session.encrypted:
            reply = await session.ask(b"STARTTLS", "STARTTLS")
            if reply.code == 220:
                session.start_tls(self.options)
                await session.hello()
            elif self.policy == ENFORCED:
                session.quit_now()
                raise SessionDeferral(reply, "blocked")
            else:
                refusal = reply
        if self.policy == ENFORCED and not session.encrypted:
            if self.peer_policy is not None:
                self.peer_policy.report("starttls-not-supported")
            session.quit_now()
            raise SessionDeferral(Reply(450, "4.7.4", "TLS is required, but was not offered"), "blocked")
        if self.peer_policy is not None:
            self._check_peer(session)
        return refusal

    def _check_peer(self, session: Session) -> None:
        """
        The server's certificate, once TLS is up: a failure is reported, and under an enforced
        peer policy the session ends.
        """
        policy = self.peer_policy
        if not session.encrypted:
            policy.report("starttls-not-supported")
            failure = "starttls-not-supported: the server offers no STARTTLS"
        else:
            try:
                failure = policy.check()
            except Exception as e:
                failure = f"validation-failure: {type(e).__name__}"
            policy.report(failure.partition(":")[0] if failure else None)
        if failure and policy.enforce:
            session.quit_now()
            raise SessionDeferral(Reply(450, "4.7.5", f"{policy.name} policy not met: {failure}"), "blocked")
        if failure:
            log.info("{policy} policy (testing) not met by {host}: {why}", policy=policy.name,
                     host=getattr(policy, "host", "?"), why=failure)
