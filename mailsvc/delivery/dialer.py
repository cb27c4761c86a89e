"""
How the delivery worker reaches a destination and what TLS it asks of it. The configured relay
(smarthost) is reached by name, its certificate verified: over implicit TLS, STARTTLS, or
(``delivery.relay_tls = none``) in plain text. A recipient's MX host is reached at an address
checked to be public (``outside.addresses``); under MTA-STS or DANE its certificate is checked
once TLS is up (``crypto.peers``), otherwise TLS protects against passive eavesdropping only.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet import endpoints
from twisted.internet.interfaces import IStreamClientEndpoint

from mailsvc.crypto import tls
from mailsvc.crypto.peers import RecordingClientTLS, TrustStore
from mailsvc.delivery.connections import Destination
from mailsvc.delivery.policy import PeerPolicy
from mailsvc.outside.addresses import PublicAddresses
from mailsvc.outside.fetch import TrustRoots
from mailsvc.smtp.outbound import OutboundSMTP
from mailsvc.smtp.outbound_tls import ENFORCED, OPPORTUNISTIC

#: Seconds a TCP connection may take.
CONNECT_TIMEOUT = 30


class Dialer:
    """``connect`` opens an SMTP session with a destination (``Connections``' ``connect``)."""

    def __init__(self, clock, hostname: str, addresses: PublicAddresses, trust_roots: TrustRoots,
                 trust_store: TrustStore, report: Callable | None, relay_tls: str = "starttls",
                 relay_auth: tuple[str, str] | None = None):
        self._clock = clock
        self._hostname = hostname
        self._addresses = addresses
        #: The relay's certificate is verified against these (the platform's plus ``security.ca_file``).
        self._trust_roots = trust_roots
        #: The anchors of MTA-STS verification.
        self._trust_store = trust_store
        #: Counts each session under MTA-STS or DANE for TLS reporting (``TlsReports.count``).
        self._report = report
        self._relay_tls = relay_tls
        self._relay_auth = relay_auth

    async def connect(self, destination: Destination) -> OutboundSMTP:
        if destination.relay:
            endpoint, protocol = self._relay(destination)
        else:
            endpoint, protocol = await self._mx_host(destination)
        await endpoints.connectProtocol(endpoint, protocol)
        return protocol

    def _relay(self, destination: Destination):
        endpoint: IStreamClientEndpoint = endpoints.HostnameEndpoint(self._clock, destination.host, destination.port,
                                              timeout=CONNECT_TIMEOUT)
        verified = tls.verified_client_options(destination.host, self._trust_roots)
        if self._relay_tls == "implicit":
            endpoint = endpoints.wrapClientTLS(verified, endpoint)
        starttls = self._relay_tls == "starttls"
        tls_policy, tls_options = (ENFORCED, verified) if starttls else (OPPORTUNISTIC, None)
        protocol = OutboundSMTP(self._clock, self._hostname, tls_policy, tls_options, auth=self._relay_auth,
                                allow_plaintext_auth=not starttls)
        return endpoint, protocol

    async def _mx_host(self, destination: Destination):
        address = await self._addresses.check(destination.host)
        endpoint_type = endpoints.TCP4ClientEndpoint if address.version == 4 else endpoints.TCP6ClientEndpoint
        endpoint = endpoint_type(self._clock, str(address), destination.port, timeout=CONNECT_TIMEOUT)
        if destination.auth is not None:
            # MTA-STS or DANE: the certificate is checked once TLS is up (crypto/peers.py).
            creator = RecordingClientTLS(destination.host)
            protocol = OutboundSMTP(
                self._clock, self._hostname, destination.tls_policy, creator,
                peer_policy=PeerPolicy(destination.auth, creator, self._trust_store, self._report),
            )
        else:
            # No policy: TLS protects against passive eavesdropping; "enforced" means never
            # in plain text.
            protocol = OutboundSMTP(self._clock, self._hostname, destination.tls_policy,
                                    tls.unverified_client_options())
        return endpoint, protocol
