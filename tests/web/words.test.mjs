// Errors in words, with their code after them (mailsvc/web/words.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { errorText, reasonText } from "../../mailsvc/web/words.js";

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
