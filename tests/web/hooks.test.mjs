// A webhook's deliveries in words (mailsvc/web/hooks.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { attemptError, pretty, successText } from "../../mailsvc/web/hooks.js";

test("an HTTP status says which side failed; a success says nothing", () => {
  assert.equal(attemptError(200, "ok"), null);
  assert.equal(attemptError(204, ""), null);
  assert.equal(attemptError(404, "Not Found"), "4xx: the endpoint refused the event (HTTP 404)");
  assert.equal(attemptError(503, "busy"), "5xx: the endpoint failed (HTTP 503)");
});

test("without a status, the dispatcher's reason in words", () => {
  assert.equal(attemptError(null, "timeout: no response data for 10 s"), "timeout: the endpoint did not answer in time");
  assert.equal(attemptError(null, "connect: could not connect: ConnectionRefusedError"),
    "refused: nothing listens at the endpoint's port");
  assert.equal(attemptError(null, "tls: TLS handshake or certificate verification failed"),
    "TLS: the handshake or the certificate check failed");
  assert.equal(attemptError(null, "dns: no address for hooks.example.com"), "DNS: the endpoint's name did not resolve");
  assert.equal(attemptError(null, "refused: 10.0.0.1 is not a public address"),
    "refused here, not sent: 10.0.0.1 is not a public address");
  assert.equal(attemptError(null, "internal error"), "internal error");
  assert.equal(attemptError(null, ""), null);
});

test("a payload is laid out to read; one that is not JSON is kept as it is", () => {
  assert.equal(pretty('{"type":"email.sent","data":{"to":["a@example.com"]}}'),
    '{\n  "type": "email.sent",\n  "data": {\n    "to": [\n      "a@example.com"\n    ]\n  }\n}');
  assert.equal(pretty("not json"), "not json");
});

test("the last 24 hours' success as a share of the deliveries attempted", () => {
  assert.equal(successText({ delivered: 4, attempted: 5 }), "80 % delivered (4 of 5 deliveries)");
  assert.equal(successText({ delivered: 0, attempted: 1 }), "0 % delivered (0 of 1 delivery)");
  assert.equal(successText({ delivered: 0, attempted: 0 }), "No delivery attempted in the last 24 hours.");
});
