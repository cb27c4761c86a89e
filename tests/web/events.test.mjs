// An e-mail's events in words (mailsvc/web/events.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { answerOf, detailOf } from "../../mailsvc/web/events.js";

test("a bounce's and a delay's answer is the server's whole reply", () => {
  assert.equal(answerOf({ type: "hard", code: 550, enhanced_code: "5.1.1", message: "No such user here" }),
    "550 5.1.1 No such user here");
  assert.equal(answerOf({ class: "transient", code: 451, enhanced_code: null, message: "Try again later" }),
    "451 Try again later");
  assert.equal(answerOf({ response: "250 2.0.0 Ok: queued as 4XyZ" }), "250 2.0.0 Ok: queued as 4XyZ");
});

test("an event without an answer has none", () => {
  assert.equal(answerOf({ to: ["a@example.com"] }), null);
  assert.equal(answerOf(null), null);
});

test("a delay says its attempt and the next one; a failure its reason", () => {
  assert.equal(detailOf({ attempt: 2, next_attempt_at: "2026-12-02T04:00:00Z" }),
    "attempt 2, next attempt 2026-12-02T04:00:00Z");
  assert.equal(detailOf({ reason: "retry_window_exhausted" }), "retry window exhausted");
  assert.equal(detailOf({}), null);
});
