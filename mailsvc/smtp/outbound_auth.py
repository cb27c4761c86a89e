"""
AUTH at a smarthost, the outbound client's step after (STARTTLS and) EHLO, once per connection
(docs/decisions.md, "Outbound SMTP client"): PLAIN with an initial response when offered, else
LOGIN (``AUTH=`` lines count). The credentials go only over an encrypted connection unless
plain text is allowed; the password is never logged or put into a reply, an error or a repr.
"""

from __future__ import annotations

import base64

import attrs
from twisted.logger import Logger

from mailsvc.smtp.replies import Reply, Session, SessionDeferral

log = Logger()


def offered_mechanisms(extensions: dict[str, str]) -> set[str]:
    """SASL mechanisms from ``AUTH a b`` and the pre-standard ``AUTH=a b``."""
    found = set()
    for keyword, params in extensions.items():
        if keyword == "AUTH":
            found.update(params.upper().split())
        elif keyword.startswith("AUTH="):
            found.update((keyword[5:] + " " + params).upper().split())
    return found


@attrs.frozen
class Credentials:
    """A smarthost's username and password, and whether they may go over plain text."""

    username: str
    password: str = attrs.field(repr=False)
    allow_plaintext: bool = False

    @classmethod
    def checked(cls, auth: tuple[str, str] | None, allow_plaintext: bool) -> Credentials | None:
        """``auth`` as (username, password), refused (ValueError) when it could not be sent whole."""
        if auth is None:
            return None
        if (len(auth) != 2 or not all(isinstance(part, str) for part in auth)
                or any("\x00" in part or "\r" in part or "\n" in part for part in auth)):
            raise ValueError("auth must be (username, password): strings without NUL, CR or LF")
        if not auth[0]:
            raise ValueError("auth needs a username")
        return cls(auth[0], auth[1], allow_plaintext)

    async def authenticate(self, session: Session, tls_refusal: Reply | None) -> str:
        """
        The SASL mechanism that authenticated the session. Any failure ends the session: 4xx
        defers every recipient as ``transient``, anything else as ``blocked`` (the operator must
        fix the credentials or the smarthost's set-up).
        """
        if not session.encrypted and not self.allow_plaintext:
            if tls_refusal is not None:
                why = f"smarthost refused STARTTLS ({tls_refusal.code} {tls_refusal.text})"
            elif "STARTTLS" in session.extensions:
                why = "no TLS options were given for the smarthost"
            else:
                why = "smarthost offers no TLS"
            session.quit_now()
            raise SessionDeferral(Reply(450, "4.7.0", f"{why}; credentials not sent"), "blocked")
        mechanisms = offered_mechanisms(session.extensions)
        username, password = self.username.encode("utf-8"), self.password.encode("utf-8")
        if "PLAIN" in mechanisms:
            mechanism = "PLAIN"
            first = b"AUTH PLAIN " + base64.b64encode(b"\x00" + username + b"\x00" + password)
            responses = []
        elif "LOGIN" in mechanisms:
            mechanism = "LOGIN"
            first = b"AUTH LOGIN"
            responses = [base64.b64encode(username), base64.b64encode(password)]
        else:
            offered = " ".join(sorted(mechanisms)) or "none"
            session.quit_now()
            raise SessionDeferral(Reply(
                450, "4.7.0", f"smarthost offers no AUTH mechanism we support (offered: {offered}); "
                              "credentials not sent"), "blocked")
        reply = await session.ask(first, "AUTH " + mechanism)
        for response in responses:
            if reply.code != 334:
                break
            reply = await session.ask(response, "AUTH " + mechanism)
        if reply.code == 334:  # the server asks for more than the mechanism has: cancel
            reply = await session.ask(b"*", "AUTH " + mechanism)
            if reply.code < 400:
                reply = Reply(535, "5.7.0", "unexpected challenge; authentication cancelled")
        if reply.code == 235:
            return mechanism
        log.warn("smarthost refused AUTH {mechanism} for {user}: {code} {text}",
                 mechanism=mechanism, user=self.username, code=reply.code, text=reply.text)
        session.quit_now()
        raise SessionDeferral(reply, "transient" if 400 <= reply.code < 500 else "blocked")
