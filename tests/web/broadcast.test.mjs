// A broadcast's progress (mailsvc/web/broadcast.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { progressOf } from "../../mailsvc/web/broadcast.js";

test("a broadcast not sent yet says what it is in words, no figures", () => {
  assert.deepEqual(progressOf({ status: "draft", progress: { done: 0, total: 0 } }),
    { words: "A draft: nothing is sent until you send it or schedule it (Send, below)." });
  assert.deepEqual(progressOf({ status: "scheduled", progress: { done: 0, total: 0 } }),
    { words: "Scheduled: nothing is sent before its time." });
  assert.deepEqual(progressOf({ status: "canceled", progress: { done: 0, total: 40 } }),
    { words: "Canceled before anything was sent." });
  assert.deepEqual(progressOf({ status: "failed" }), { words: "It failed before anything was sent." });
});

test("once it is being sent, its figures", () => {
  assert.deepEqual(progressOf({ status: "queued", progress: { done: 0, total: 1200 } }),
    { done: 0, total: 1200, pct: 0, text: "0 / 1,200 written (0 %)" });
  assert.equal(progressOf({ status: "sending", progress: { done: 300, total: 1200 } }).text, "300 / 1,200 written (25 %)");
  assert.equal(progressOf({ status: "sent", recipients: 7 }).text, "7 / 7 written (100 %)");
  assert.equal(progressOf({ status: "sent", progress: { done: 0, total: 0 } }).text, "0 / 0 written (100 %)");
  assert.equal(progressOf({ status: "canceled", progress: { done: 10, total: 40 } }).text, "10 / 40 written (25 %)");
});
