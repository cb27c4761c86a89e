// Errors in words, with their code after them (mailsvc/web/words.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { STATES, errorText, reasonText, stateText } from "../../mailsvc/web/words.js";

test("a stored reason is a sentence with the code after it, never the bare code", () => {
  assert.equal(reasonText("domain_not_verified"), "The sending domain is not verified (domain_not_verified)");
  assert.equal(reasonText("segment_deleted"), "The segment was deleted while it was being sent (segment_deleted)");
  assert.equal(reasonText("something_new"), "It stopped (something_new)");
});

test("an API error is its message, then its code; without a message the code's words", () => {
  assert.equal(errorText("The sending domain is not verified. Please, add and verify your domain.", "validation_error"),
    "The sending domain is not verified. Please, add and verify your domain (validation_error)");
  assert.equal(errorText("", "domain_not_verified"), "The sending domain is not verified (domain_not_verified)");
  assert.equal(errorText(undefined, "teapot"), "Something went wrong (teapot)");
});

test("an error of the page itself (no code) is its message as a sentence", () => {
  assert.equal(errorText("The two passwords differ.", null), "The two passwords differ.");
});

test("every state shown is in words: suppression origins, delivery states, e-mail statuses", () => {
  assert.equal(stateText("hard_bounce"), "hard bounce");
  assert.equal(stateText("manual"), "added by hand");
  assert.equal(stateText("unsubscribe"), "unsubscribed");
  assert.equal(stateText("in_flight"), "being sent");
  assert.equal(stateText("deferred"), "retrying");
  assert.equal(stateText("delivery_delayed"), "delivery delayed");
  assert.equal(stateText("delivered"), "delivered");
  assert.equal(stateText("not_started"), "not started");
});

test("no word of a state is a code, and an unknown code reads without its underscores", () => {
  for (const [code, words] of Object.entries(STATES)) assert.doesNotMatch(words, /_/, code);
  assert.equal(stateText("something_new_here"), "something new here");
  assert.equal(stateText(""), "—");
  assert.equal(stateText(null), "—");
  assert.equal(stateText("constructor"), "constructor");
});
