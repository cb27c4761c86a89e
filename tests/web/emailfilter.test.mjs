// The e-mails list's filter <-> its URL hash (mailsvc/web/emailfilter.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { apiPath, moved, pages, parse, toHash } from "../../mailsvc/web/emailfilter.js";

const ID1 = "0192f0c4-1a2b-7c3d-8e4f-000000000001";
const ID9 = "0192f0c4-1a2b-7c3d-8e4f-000000000009";

test("a filter goes to the hash and comes back the same", () => {
  for (const filter of [
    { status: "", q: "", after: "", before: "" },
    { status: "bounced", q: "", after: "", before: "" },
    { status: "delivery_delayed", q: "ann@example.com & co", after: ID1, before: "" },
    { status: "", q: "Invoice #42?", after: "", before: ID9 },
  ]) {
    const hash = toHash(filter);
    assert.ok(hash.startsWith("#/emails"));
    assert.deepEqual(parse(hash.split("?")[1] || ""), filter);
  }
  assert.equal(toHash({ status: "", q: "", after: "", before: "" }), "#/emails");
  assert.equal(toHash({ status: "bounced", q: "ann", after: "", before: "" }), "#/emails?status=bounced&q=ann");
});

test("the older links of the search form keep working (#/emails?q=…)", () => {
  assert.deepEqual(parse("q=onerror"), { status: "", q: "onerror", after: "", before: "" });
  assert.deepEqual(parse(""), { status: "", q: "", after: "", before: "" });
});

test("what the hash cannot mean is left out: an unknown status, a cursor not an id, two cursors", () => {
  assert.equal(parse("status=hard_bounce").status, "");
  assert.equal(parse("after=<script>").after, "");
  assert.deepEqual(parse(`after=${ID1}&before=${ID9}`), { status: "", q: "", after: ID1, before: "" });
});

test("the request carries the filter, the page's size and its cursor", () => {
  assert.equal(apiPath({ status: "failed", q: "a b", after: ID1, before: "" }, 50),
    `/dashboard/search/emails?status=failed&q=a+b&limit=50&after=${ID1}`);
  assert.equal(apiPath({ status: "", q: "", after: "", before: "" }, 50), "/dashboard/search/emails?limit=50");
});

test("a new status or text starts on the first page; a cursor keeps the filter", () => {
  const on = { status: "bounced", q: "ann", after: ID1, before: "" };
  assert.deepEqual(moved(on, { status: "failed" }), { status: "failed", q: "ann", after: "", before: "" });
  assert.deepEqual(moved(on, { before: ID9 }), { status: "bounced", q: "ann", after: "", before: ID9 });
});

test("newer and older pages: none on the first page of one, older when there is more", () => {
  const first = { status: "bounced", q: "", after: "", before: "" };
  const items = [{ id: ID9 }, { id: ID1 }];
  assert.deepEqual(pages(first, items, false), { newer: null, older: null });
  assert.deepEqual(pages(first, items, true), { newer: null, older: `#/emails?status=bounced&after=${ID1}` });
  const second = { ...first, after: ID9 };
  assert.deepEqual(pages(second, items, false), { newer: `#/emails?status=bounced&before=${ID9}`, older: null });
  const back = { ...first, before: ID1 };
  assert.deepEqual(pages(back, items, true), {
    newer: `#/emails?status=bounced&before=${ID9}`, older: `#/emails?status=bounced&after=${ID1}` });
  assert.deepEqual(pages(first, [], true), { newer: null, older: null });
});
