"""
The parent of a multi-process node opens its listeners itself and passes them on to the
workers: a listener it cannot pass on is refused, and what it had opened is closed again.
"""

import pytest

from mailsvc import processes


async def test_a_parent_refuses_a_socket_it_cannot_pass_on():
    from twisted.internet import reactor

    with pytest.raises(ValueError, match="http listener ssl:0"):
        await processes.open_sockets(reactor, [("submission", "ssl:0:interface=127.0.0.1"), ("http", "ssl:0")])
