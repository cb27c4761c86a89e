// A webhook's deliveries in words (mailsvc/web/hooks.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { attemptError, attemptRateText, attemptWords, durationText, pretty, retryable, successText } from "../../mailsvc/web/hooks.js";
import { ATTEMPT_ERRORS } from "../../mailsvc/web/words.js";

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

test("a kept attempt's failure is in words, with its HTTP status after an answer's", () => {
  assert.equal(attemptWords({ status: 204, error: null }), null);
  assert.equal(attemptWords({ status: 503, error: "http_5xx" }), "5xx: the endpoint failed (HTTP 503)");
  assert.equal(attemptWords({ status: 410, error: "http_4xx" }), "4xx: the endpoint refused the event (HTTP 410)");
  assert.equal(attemptWords({ status: null, error: "timeout" }), "Timeout: the endpoint did not answer in time");
  assert.equal(attemptWords({ status: null, error: "refused" }),
    "Connection refused: nothing listens at the endpoint's port");
  assert.equal(attemptWords({ status: null, error: "tls" }), "TLS: the handshake or the certificate check failed");
  assert.equal(attemptWords({ status: null, error: "dns" }), "DNS: the endpoint's name did not resolve");
  assert.equal(attemptWords({ status: null, error: "something_new" }), "something new");
  assert.equal(attemptWords({ status: null, error: "constructor" }), "constructor");
});

test("every kind of failure the service keeps has its words, none a code", () => {
  const kinds = ["timeout", "refused", "connect", "tls", "dns", "connection", "too_large", "redirect", "blocked",
    "http_4xx", "http_5xx", "http_other", "internal"];
  assert.deepEqual(Object.keys(ATTEMPT_ERRORS).sort(), [...kinds].sort());
  for (const kind of kinds) assert.doesNotMatch(attemptWords({ status: null, error: kind }), /_/, kind);
});

test("an attempt's duration reads in ms, then in seconds", () => {
  assert.equal(durationText(0), "0 ms");
  assert.equal(durationText(85.4), "85 ms");
  assert.equal(durationText(1234), "1.2 s");
  assert.equal(durationText(15000), "15 s");
  assert.equal(durationText(undefined), "0 ms");
});

test("the last 24 hours' attempts as a share that succeeded", () => {
  assert.equal(attemptRateText({ succeeded: 3, made: 4 }), "75 % of attempts succeeded (3 of 4)");
  assert.equal(attemptRateText({ succeeded: 0, made: 0 }), "No attempt in the last 24 hours.");
  assert.equal(attemptRateText(undefined), "No attempt in the last 24 hours.");
});

test("retry now is offered for a pending or failed delivery of an enabled webhook, none in flight", () => {
  assert.equal(retryable({ state: "failed", in_flight: false }, "enabled"), true);
  assert.equal(retryable({ state: "pending", in_flight: false }, "enabled"), true);
  assert.equal(retryable({ state: "pending", in_flight: true }, "enabled"), false);
  assert.equal(retryable({ state: "delivered", in_flight: false }, "enabled"), false);
  assert.equal(retryable({ state: "failed", in_flight: false }, "disabled"), false);
});
