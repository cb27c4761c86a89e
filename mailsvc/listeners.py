"""
The node's listeners, each added to the node's tree as the service that stops it: the HTTP
API (drained on stop), SMTP submission, the SMTP return path and the operator's SSH manhole.
A worker adopts the sockets its parent opened (mailsvc.processes).
"""

from __future__ import annotations

from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory

from mailsvc import manhole, processes
from mailsvc.config import Config
from mailsvc.delivery.returns import ReturnPath
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.site import Site
from mailsvc.service import Node
from mailsvc.smtp import inbound
from mailsvc.smtp.submission import Submission, SubmissionFactory

log = Logger()

async def listen_submission(reactor, description: str, submission: Submission, options,
                            inherited: processes.Inherited | None = None):
    """
    One submission listener. ``ssl:...`` is implicit TLS (465/2465) with our certificate;
    ``tcp:...`` offers STARTTLS (587/2587).
    """
    implicit = description.startswith("ssl:")
    factory = SubmissionFactory(reactor, submission, options, implicit_tls=implicit)
    listening = TLSMemoryBIOFactory(options, False, factory) if implicit else factory
    return await processes.listen(reactor, "submission", description, listening, inherited)



async def listen_inbound(reactor, config: Config, node: Node, return_path: ReturnPath, tls_options,
                          inherited: processes.Inherited | None) -> None:
    """The SMTP return path (bounces, complaints, DMARC reports) on ``smtp.inbound``."""
    factory = inbound.InboundFactory(
        reactor, config.hostname, return_path.accepts, return_path.deliver, tls_options=tls_options,
    )
    port = await processes.listen(reactor, "inbound", config.smtp.inbound, factory, inherited)
    node.on_stop("SMTP return path", port.stopListening)
    node.parts.inbound_port = port.getHost().port
    if inherited is None:  # a worker's listeners are its parent's to tell
        log.info("SMTP return path listening on {endpoint}", endpoint=config.smtp.inbound)


async def listen_http(reactor, config: Config, node: Node, site: Site, inherited: processes.Inherited | None):
    """The HTTP listener; its stop lets the requests in flight finish (up to ``http.drain_timeout``)."""
    port = await processes.listen(reactor, "http", config.http.listen, site, inherited)

    async def drain():
        await port.stopListening()
        if site.in_flight:
            log.info("draining {n} HTTP requests", n=site.in_flight)
            waiting = site.drained()
            waiting.addTimeout(config.http.drain_timeout, reactor)
            try:
                await waiting
            except Exception:
                log.warn("gave up waiting for {n} HTTP requests", n=site.in_flight)

    node.on_stop("HTTP listener", drain)
    address = port.getHost()
    node.parts.http_port = address.port
    PublicUrl(config.http.public_url).warn_if_unset(address.host)
    if inherited is None:
        log.info("HTTP API listening on {host}:{port}", host=address.host, port=address.port)
    return address


async def listen_submissions(reactor, config: Config, node: Node, submission: Submission, tls_options,
                              inherited: processes.Inherited | None) -> None:
    """Every listener of ``smtp.submission``."""
    if not config.smtp.submission:
        return
    for description in config.smtp.submission:
        port = await listen_submission(reactor, description, submission, tls_options, inherited)
        node.on_stop(f"SMTP submission {description}", port.stopListening)
        node.parts.smtp_ports.append(port.getHost().port)
        if inherited is None:
            log.info("SMTP submission listening on {endpoint}", endpoint=description)


async def listen_manhole(reactor, config: Config, node: Node, parts) -> None:
    """The operator's SSH manhole (``manhole.listen``), its namespace holding the running parts."""
    names = manhole.namespace(parts=parts, db=parts.db, node=node, config=config, reactor=reactor)
    port = await manhole.listen(reactor, config.manhole.listen, names, config.state_dir)
    node.on_stop("SSH manhole", port.stopListening)
    node.parts.manhole_address = port.getHost()
    log.info("SSH manhole listening on {address}", address=manhole.describe(port.getHost()))


