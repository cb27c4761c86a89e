"""The return-path listener's injected ``accepts`` and ``deliver`` in tests, recording what it is given."""

from twisted.internet import defer

VERP = "b-agaz4pqxjbdmtmgqz3h7k2wvnm-q7xk2mfa@bounces.acme.example"


class Recorder:
    """The injected ``accepts`` and ``deliver``: our return-path addresses only; records messages."""

    def __init__(self, asynchronous=True):
        self.asynchronous = asynchronous
        self.delivered: list[tuple[str, list[str], bytes]] = []
        self.asked: list[str] = []
        self.accept_pending: defer.Deferred | None = None
        self.deliver_pending: defer.Deferred | None = None
        self.fail = False

    def _ours(self, address: str) -> bool:
        local, _, host = address.rpartition("@")
        return host.lower() == "bounces.acme.example" and (
            local.lower() in ("postmaster", "abuse", "fbl") or local.lower().startswith("b-"))

    def accepts(self, address):
        self.asked.append(address)
        if not self.asynchronous:
            return self._ours(address)

        async def check():
            if self.accept_pending is not None:
                await self.accept_pending
            return self._ours(address)

        return check()

    async def deliver(self, mail_from, recipients, message):
        if self.deliver_pending is not None:
            await self.deliver_pending
        if self.fail:
            raise RuntimeError("store unavailable")
        self.delivered.append((mail_from, recipients, message))
