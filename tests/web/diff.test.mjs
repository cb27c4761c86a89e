// The line diff shown before a publish (mailsvc/web/diff.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { lineDiff } from "../../mailsvc/web/diff.js";

test("equal texts are all kept lines", () => {
  assert.deepEqual(lineDiff("a\nb", "a\nb"), [["=", "a"], ["=", "b"]]);
});

test("a changed line is a removal then an addition, around the common lines", () => {
  assert.deepEqual(lineDiff("<p>\nHello\n</p>", "<p>\nHi there\n</p>\n<hr>"),
    [["=", "<p>"], ["-", "Hello"], ["+", "Hi there"], ["=", "</p>"], ["+", "<hr>"]]);
});

test("nothing before (never published) is all additions; null and undefined are empty texts", () => {
  assert.deepEqual(lineDiff(null, "a\nb"), [["-", ""], ["+", "a"], ["+", "b"]]);
  assert.deepEqual(lineDiff(undefined, undefined), [["=", ""]]);
});

test("the longest common subsequence is kept, not the first match", () => {
  const kept = lineDiff("x\na\nb\nc", "a\nb\nc\nx").filter(([k]) => k === "=").map(([, l]) => l);
  assert.deepEqual(kept, ["a", "b", "c"]);
});

test("texts too large to compare line by line are a whole removal and addition", () => {
  const big = Array.from({ length: 2001 }, (_, i) => `line ${i}`).join("\n");
  const out = lineDiff(big, big);
  assert.equal(out.length, 4002);
  assert.ok(out.slice(0, 2001).every(([k]) => k === "-") && out.slice(2001).every(([k]) => k === "+"));
});
