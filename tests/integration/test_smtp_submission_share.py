"""
One worker of a node of two: it takes its share of the node's submission connections, but the
per-client cap whole, since the kernel spreads one client's connections between the workers
unevenly (docs/operations.md, "Limits of the public listeners").
"""

import pytest
import pytest_twisted as pt
from twisted.internet import threads

from mailsvc.domain.shares import Share
from tests.helpers.smtp import smtp_ports  # noqa: F401 (a fixture)
from tests.integration.test_smtp_submission_limits import config, opened  # noqa: F401 (a fixture)


@pytest.fixture
def assembly() -> dict:
    return {"share": Share(0, 2)}


@pt.ensureDeferred
async def test_a_worker_takes_its_share_of_connections_and_the_whole_per_client_cap(api, smtp_ports):  # noqa: F811
    port = smtp_ports["starttls"]

    def scenario():
        first, first_reply = opened(port)
        second, second_reply = opened(port)  # the node's per-client cap is 2: this worker allows both
        try:
            assert first_reply.startswith(b"220 ") and second_reply.startswith(b"220 "), second_reply
            _, over_all = opened(port, "127.0.0.2")  # this worker's share of the node's 3 is 2
            assert over_all == b"421 4.7.0 Too many connections; try again later\r\n"
        finally:
            first.close()
            second.close()

    await threads.deferToThread(scenario)
