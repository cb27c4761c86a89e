"""
``tor.onion``: the HTTP API published as a v3 onion service (mailsvc.onion) by the node's first
process, and its address shared with the other workers through the state directory.
"""

from __future__ import annotations

import os

from twisted.internet import endpoints

from mailsvc import onion, processes
from mailsvc.config import Config
from mailsvc.loop import Loop
from mailsvc.service import Node

#: How often a worker other than the first reads the onion address the first one published.
ONION_ADDRESS_SECONDS = 2
#: Where the first worker leaves the published onion address for the others (``GET /admin/v1``).
ONION_ADDRESS_FILE = "onion-address"



async def start_onion(reactor, config: Config, node: Node, node_info: dict, http_address,
                      inherited: processes.Inherited | None) -> None:
    """
    ``tor.onion``: the HTTP API as a v3 onion service (mailsvc.onion), published by the node's
    first process only; the other workers read its address from the state directory so that
    ``GET /admin/v1`` tells it whichever worker answers.
    """
    shared = config.state_dir / ONION_ADDRESS_FILE
    if inherited is not None and inherited.slot != 0:
        async def read_address() -> None:
            try:
                node_info["onion"] = shared.read_text().strip() or None
            except FileNotFoundError:
                node_info["onion"] = None

        loop = Loop(reactor, "read onion address", ONION_ADDRESS_SECONDS, read_address)
        await node.add(loop)
        return

    import txtorcon

    shared.unlink(missing_ok=True)  # left by a run that did not stop cleanly
    password = config.tor.control_password

    def connect():
        return txtorcon.build_tor_connection(
            endpoints.clientFromString(reactor, config.tor.control), build_state=False,
            password_function=lambda: password or None,
        )

    def published(address: str) -> None:
        node_info["onion"] = address
        if inherited is not None:
            partial = shared.with_name(shared.name + ".partial")
            partial.write_text(address + "\n")
            os.replace(partial, shared)

    service = onion.OnionService(
        reactor, connect, config.state_dir / onion.KEY_FILE, config.tor.port,
        onion.port_target(http_address.host, http_address.port), published,
    )

    async def stop() -> None:
        await service.stop()
        node_info["onion"] = None
        shared.unlink(missing_ok=True)

    await service.start()
    node.on_stop("onion service", stop)
    node.parts.onion = service
