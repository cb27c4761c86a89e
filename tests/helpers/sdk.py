"""Calling the official ``resend`` Python SDK (blocking) from a test on the reactor."""

import resend
from twisted.internet import threads


async def call(api, key: str, fn, *args):
    """Run ``fn(*args)`` in a thread with the SDK aimed at ``api`` and using ``key``."""

    def run():
        resend.api_url = api.url
        resend.api_key = key
        return fn(*args)

    return await threads.deferToThread(run)
