// The broadcast editor's placeholder menu (mailsvc/web/placeholders.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { PLACEHOLDERS, insertPlaceholder } from "../../mailsvc/web/placeholders.js";

test("the menu offers the placeholders a broadcast fills, each with a label", () => {
  const values = PLACEHOLDERS.map(([value]) => value);
  assert.ok(values.includes("{{{RESEND_UNSUBSCRIBE_URL}}}") && values.includes("{{{FIRST_NAME|there}}}"));
  assert.ok(PLACEHOLDERS.every(([value, label]) => /^\{\{\{[^{}]+\}\}\}$/.test(value) && label));
});

test("a choice goes in at the caret, which then follows it", () => {
  assert.deepEqual(insertPlaceholder("<p>Hello ,</p>", 9, 9, "{{{EMAIL}}}"), { value: "<p>Hello {{{EMAIL}}},</p>", caret: 20 });
});

test("a choice replaces the selection", () => {
  assert.deepEqual(insertPlaceholder("Hi NAME!", 3, 7, "{{{FIRST_NAME|there}}}"), { value: "Hi {{{FIRST_NAME|there}}}!", caret: 25 });
});

test("with no caret (never focused), or one out of range, it goes at the end", () => {
  assert.deepEqual(insertPlaceholder("abc", undefined, undefined, "{{{X}}}"), { value: "abc{{{X}}}", caret: 10 });
  assert.deepEqual(insertPlaceholder("abc", 99, 120, "!"), { value: "abc!", caret: 4 });
  assert.deepEqual(insertPlaceholder("abcdef", 4, 2, "-"), { value: "abcd-ef", caret: 5 });
});
