"""
A fake AI provider on loopback: a real HTTP server speaking the chat-completions wire format
(``POST /v1/chat/completions``), answering each request from a per-test script.

    provider.script(Turn(content='{"subject": ...}'), Turn(status=429), Turn(stall=True))

Every request body is kept (``provider.requests``); a stalled turn is answered when
``release()`` is called (or never, for the timeout case: the client gives up first).
"""

from __future__ import annotations

import json

import attrs
import pytest_twisted
from twisted.internet import defer, reactor, task
from twisted.web import resource
from twisted.web.server import NOT_DONE_YET, Site


@attrs.define
class Turn:
    content: str | None = None
    status: int = 200
    refusal: str | None = None
    finish_reason: str = "stop"
    delay: float = 0  # seconds before answering
    stall: bool = False  # answer only on release()
    raw: bytes | None = None  # the body as is


class _Completions(resource.Resource):
    isLeaf = True

    def __init__(self, provider: FakeProvider):
        super().__init__()
        self._provider = provider

    def render_POST(self, request):  # noqa: N802
        provider = self._provider
        provider.requests.append({"path": request.path.decode(), "headers": {
            k.decode().lower(): b",".join(v).decode() for k, v in request.requestHeaders.getAllRawHeaders()},
            "body": json.loads(request.content.read())})
        turn = provider.turns.pop(0) if provider.turns else Turn(status=500, content="no turn scripted")
        if turn.stall:
            provider.stalled.append(request)
            return NOT_DONE_YET
        if turn.delay:
            call = reactor.callLater(turn.delay, self._answer, request, turn)
            request.notifyFinish().addErrback(lambda _: call.active() and call.cancel())
            return NOT_DONE_YET
        return self._body(request, turn)

    def _answer(self, request, turn):
        if not request._disconnected:
            request.write(self._body(request, turn))
            request.finish()

    @staticmethod
    def _body(request, turn: Turn) -> bytes:
        request.setResponseCode(turn.status)
        request.setHeader("Content-Type", "application/json")
        if turn.raw is not None:
            return turn.raw
        if turn.status != 200:
            return json.dumps({"error": {"message": turn.content or "failed", "type": "server_error"}}).encode()
        message = {"role": "assistant", "content": turn.content, "refusal": turn.refusal}
        return json.dumps({
            "id": "chatcmpl-test", "object": "chat.completion", "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 80, "total_tokens": 200},
        }).encode()


class FakeProvider:
    def __init__(self):
        self.turns: list[Turn] = []
        self.requests: list[dict] = []
        self.stalled: list = []
        root = resource.Resource()
        v1 = resource.Resource()
        root.putChild(b"v1", v1)
        v1.putChild(b"chat", _Chat(self))
        site = Site(root)
        site.displayTracebacks = False
        self.port = reactor.listenTCP(0, site, interface="127.0.0.1")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port.getHost().port}/v1"

    def script(self, *turns: Turn) -> None:
        self.turns.extend(turns)

    def release(self) -> None:
        stalled, self.stalled = self.stalled, []
        for request in stalled:
            if not request._disconnected:
                request.setResponseCode(503)
                request.finish()

    async def stop(self) -> None:
        self.release()
        await self.port.stopListening()
        await task.deferLater(reactor, 0, lambda: None)


class _Chat(resource.Resource):
    def __init__(self, provider: FakeProvider):
        super().__init__()
        self.putChild(b"completions", _Completions(provider))


@pytest_twisted.async_yield_fixture
async def fake_ai():
    provider = FakeProvider()
    yield provider
    await provider.stop()
    await defer.succeed(None)
