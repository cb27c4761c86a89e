// The e-mails list's filter <-> its URL hash (mailsvc/web/emailfilter.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { apiPath, dayStart, moved, narrowed, pages, parse, toHash } from "../../mailsvc/web/emailfilter.js";

const ID1 = "0192f0c4-1a2b-7c3d-8e4f-000000000001";
const ID9 = "0192f0c4-1a2b-7c3d-8e4f-000000000009";

test("a filter goes to the hash and comes back the same", () => {
  for (const filter of [
    { status: "", q: "", from: "", to: "", domain: "", after: "", before: "" },
    { status: "bounced", q: "", from: "", to: "", domain: "", after: "", before: "" },
    { status: "delivery_delayed", q: "ann@example.com & co", from: "", to: "", domain: "", after: ID1, before: "" },
    { status: "", q: "Invoice #42?", from: "", to: "", domain: "", after: "", before: ID9 },
  ]) {
    const hash = toHash(filter);
    assert.ok(hash.startsWith("#/emails"));
    assert.deepEqual(parse(hash.split("?")[1] || ""), filter);
  }
  assert.equal(toHash({ status: "", q: "", from: "", to: "", domain: "", after: "", before: "" }), "#/emails");
  assert.equal(toHash({ status: "bounced", q: "ann", from: "", to: "", domain: "", after: "", before: "" }), "#/emails?status=bounced&q=ann");
});

test("the older links of the search form keep working (#/emails?q=…)", () => {
  assert.deepEqual(parse("q=onerror"), { status: "", q: "onerror", from: "", to: "", domain: "", after: "", before: "" });
  assert.deepEqual(parse(""), { status: "", q: "", from: "", to: "", domain: "", after: "", before: "" });
});

test("what the hash cannot mean is left out: an unknown status, a cursor not an id, two cursors", () => {
  assert.equal(parse("status=hard_bounce").status, "");
  assert.equal(parse("after=<script>").after, "");
  assert.deepEqual(parse(`after=${ID1}&before=${ID9}`), { status: "", q: "", from: "", to: "", domain: "", after: ID1, before: "" });
});

test("the request carries the filter, the page's size and its cursor", () => {
  assert.equal(apiPath({ status: "failed", q: "a b", from: "", to: "", domain: "", after: ID1, before: "" }, 50),
    `/dashboard/search/emails?status=failed&q=a+b&limit=50&after=${ID1}`);
  assert.equal(apiPath({ status: "", q: "", from: "", to: "", domain: "", after: "", before: "" }, 50), "/dashboard/search/emails?limit=50");
});

test("a new status or text starts on the first page; a cursor keeps the filter", () => {
  const on = { status: "bounced", q: "ann", from: "", to: "", domain: "", after: ID1, before: "" };
  assert.deepEqual(moved(on, { status: "failed" }), { status: "failed", q: "ann", from: "", to: "", domain: "", after: "", before: "" });
  assert.deepEqual(moved(on, { before: ID9 }), { status: "bounced", q: "ann", from: "", to: "", domain: "", after: "", before: ID9 });
});

test("newer and older pages: none on the first page of one, older when there is more", () => {
  const first = { status: "bounced", q: "", from: "", to: "", domain: "", after: "", before: "" };
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

test("a range of days and a sending domain go to the hash and come back the same", () => {
  const filter = { status: "", q: "", from: "2026-11-01", to: "2026-11-30", domain: "mail.example.com", after: "", before: "" };
  const hash = toHash(filter);
  assert.equal(hash, "#/emails?from=2026-11-01&to=2026-11-30&domain=mail.example.com");
  assert.deepEqual(parse(hash.split("?")[1]), filter);
  assert.equal(parse("from=yesterday&to=2026-13-45&domain=<b>").from, "");
  assert.equal(parse("to=2026-13-45").to, "");
  assert.equal(parse("domain=<b>").domain, "");
  assert.equal(parse("domain=Mail.Example.COM").domain, "mail.example.com");
});

test("the request's days are the instants the reader's days begin and end", () => {
  const path = apiPath({ status: "", q: "", from: "2026-11-01", to: "2026-11-30", domain: "example.com", after: "", before: "" }, 50);
  const params = new URLSearchParams(path.split("?")[1]);
  assert.equal(params.get("since"), new Date(2026, 10, 1).toISOString());
  assert.equal(params.get("until"), new Date(2026, 11, 1).toISOString());
  assert.equal(params.get("domain"), "example.com");
  assert.equal(dayStart("2026-12-31", true), new Date(2027, 0, 1).toISOString());
});

test("a filter narrows the list by anything but its cursor", () => {
  assert.equal(narrowed(parse(`after=${ID1}`)), false);
  assert.equal(narrowed(parse("from=2026-11-01")), true);
  assert.equal(narrowed(parse("domain=example.com")), true);
});
