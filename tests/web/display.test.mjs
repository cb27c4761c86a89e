// What the console shows of a text it did not write (mailsvc/web/display.js), under node: the
// same table as tests/unit/test_display.py, and the console's pages use it for stored text.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { shown, shownText } from "../../mailsvc/web/display.js";

const CASES = [
  ["451 4.7.1 try again later", "451 4.7.1 try again later"],
  ["Café Müller", "Café Müller"],
  ["שלום عربى 日本語 🙂", "שלום عربى 日本語 🙂"],
  ["C:\\path \\x1b", "C:\\path \\x1b"],
  ["", ""],
  ["451 \x1b[2J\x1b[H\x1b]0;PWNED\x07", "451 \\x1b[2J\\x1b[H\\x1b]0;PWNED\\x07"],
  ["a\tb", "a\\x09b"],
  ["one\ntwo\r\n", "one\\x0atwo\\x0d\\x0a"],
  ["\x00", "\\x00"],
  ["\x7f", "\\x7f"],
  ["\x9b2J\x85", "\\x9b2J\\x85"],
  ["Acme\u202eevil", "Acme\\u202eevil"],
  ["\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"],
  ["\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"],
  ["\u061c", "\\u061c"],
  ["Ac\u200bme", "Ac\\u200bme"],
  ["\u200c\u200d\u200e\u200f", "\\u200c\\u200d\\u200e\\u200f"],
  ["\ufeffAcme", "\\ufeffAcme"],
  ["a\u2028b\u2029", "a\\u2028b\\u2029"],
  ["x\ud800", "x\\ud800"],
  ["\udfffy", "\\udfffy"],
  ["a\u00a0b\u2002c", "a\u00a0b\u2002c"],
  ["\u2010\u2030\u2065\u206a", "\u2010\u2030\u2065\u206a"],
];

test("each character that would act is shown as its escape, everything else as it is", () => {
  for (const [text, expected] of CASES) assert.equal(shown(text), expected, JSON.stringify(text));
});

test("a pair of surrogates (an emoji) is one character and stays; other values become text", () => {
  assert.equal(shown("🙂\ud83d"), "🙂\\ud83d");
  assert.equal(shown(451), "451");
  assert.equal(shown(null), null);
  assert.equal(shown(undefined), undefined);
});

test("the console's pages show stored text through it", () => {
  for (const page of ["tenants", "queue", "audit", "waitlist"]) {
    const source = readFileSync(new URL(`../../mailsvc/web/console/${page}.js`, import.meta.url), "utf8");
    assert.match(source, /import \{ shown \} from "\/ui\/display\.js";/, page);
  }
});

test("the dashboard's text keeps its lines, tabs and joiners, and still reorders nothing", () => {
  const cases = [
    ["Subject: Hi\r\n\tfolded\n", "Subject: Hi\r\n\tfolded\n"],
    ["👨\u200d👩\u200d👧 deals", "👨\u200d👩\u200d👧 deals"],
    ["می\u200cخواهم", "می\u200cخواهم"],
    ["invoice\u202efdp.exe", "invoice\\u202efdp.exe"],
    ["\u2066x\u2069 \u200bA\u200e\u200f\ufeff", "\\u2066x\\u2069 \\u200bA\\u200e\\u200f\\ufeff"],
    ["\x1b[2J\x07\x0b\x0c\x7f\x85", "\\x1b[2J\\x07\\x0b\\x0c\\x7f\\x85"],
    ["a\u2028b", "a\\u2028b"],
    ["x\ud800", "x\\ud800"],
  ];
  for (const [text, expected] of cases) assert.equal(shownText(text), expected, JSON.stringify(text));
  assert.equal(shownText(null), null);
});

test("the page builder shows every text it is given through shownText, but a textarea's value as it is", () => {
  const dom = readFileSync(new URL("../../mailsvc/web/dom.js", import.meta.url), "utf8");
  assert.match(dom, /import \{ shownText \} from "\.\/display\.js"/);
  assert.match(dom, /localName === "textarea" \? String\(child\) : shownText\(child\)/);
});
