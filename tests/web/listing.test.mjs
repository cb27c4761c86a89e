// A list page's state <-> its URL hash and the API's query (mailsvc/web/listing.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { apiQuery, listHash, listState, pagesOf } from "../../mailsvc/web/listing.js";

const ID1 = "0192f0c4-1a2b-7c3d-8e4f-000000000001";
const ID5 = "0192f0c4-1a2b-7c3d-8e4f-000000000005";
const ID9 = "0192f0c4-1a2b-7c3d-8e4f-000000000009";
const ITEMS = [{ id: ID9 }, { id: ID5 }, { id: ID1 }];

test("a list's state goes to the hash and comes back the same", () => {
  for (const state of [
    { origin: "", after: "", before: "" },
    { origin: "hard_bounce", after: ID1, before: "" },
    { origin: "a & b?", after: "", before: ID9 },
  ]) {
    const hash = listHash("#/suppressions", state);
    assert.ok(hash.startsWith("#/suppressions"));
    assert.deepEqual(listState(hash.split("?")[1] || "", ["origin"]), state);
  }
  assert.equal(listHash("#/broadcasts", { after: "", before: "" }), "#/broadcasts");
});

test("a cursor that is not an id, and before beside after, are left out", () => {
  assert.deepEqual(listState("after=<script>&before=x y"), { after: "", before: "" });
  assert.deepEqual(listState(`after=${ID1}&before=${ID9}`), { after: ID1, before: "" });
  assert.deepEqual(listState(`before=${ID9}`), { after: "", before: ID9 });
});

test("the API's query names its filters as the API does, with the page's limit", () => {
  const query = new URLSearchParams(apiQuery({ q: "ann", segment: ID5, after: ID1, before: "" }, 50, { segment: "segment_id" }));
  assert.deepEqual(Object.fromEntries(query), { limit: "50", q: "ann", segment_id: ID5, after: ID1 });
  assert.equal(apiQuery({ after: "", before: ID9 }, 20), `limit=20&before=${ID9}`);
});

test("the first page links to older ones only, and only when there are more", () => {
  const first = { origin: "manual", after: "", before: "" };
  assert.deepEqual(pagesOf("#/suppressions", first, ITEMS, true),
    { newer: null, older: `#/suppressions?origin=manual&after=${ID1}` });
  assert.deepEqual(pagesOf("#/suppressions", first, ITEMS, false), { newer: null, older: null });
  assert.deepEqual(pagesOf("#/suppressions", first, [], true), { newer: null, older: null });
});

test("a page read older links back newer, and one read newer links older", () => {
  assert.deepEqual(pagesOf("#/broadcasts", { after: ID9, before: "" }, ITEMS, false),
    { newer: `#/broadcasts?before=${ID9}`, older: null });
  assert.deepEqual(pagesOf("#/broadcasts", { after: "", before: ID1 }, ITEMS, true),
    { newer: `#/broadcasts?before=${ID9}`, older: `#/broadcasts?after=${ID1}` });
  assert.deepEqual(pagesOf("#/broadcasts", { after: "", before: ID1 }, ITEMS, false),
    { newer: null, older: `#/broadcasts?after=${ID1}` });
});

test("another key is the cursor where the list says (a webhook's deliveries: the event's id)", () => {
  const rows = [{ event_id: ID9 }, { event_id: ID1 }];
  assert.deepEqual(pagesOf("#/webhooks/w", { after: "", before: "" }, rows, true, "event_id"),
    { newer: null, older: `#/webhooks/w?after=${ID1}` });
});
