// The contacts import's CSV rules (mailsvc/web/csv.js), under node: no browser, no server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BATCH_ROWS, CsvError, batches, columns, contactsOf, records, rowMessage } from "../../mailsvc/web/csv.js";

test("records follow RFC 4180: quotes, doubled quotes, line breaks inside a field, CRLF/LF/CR, a BOM", () => {
  const text = '\ufeffemail,city\r\nann@example.com,"Port\nTown, ""the"" harbour"\rbob@example.com,Oslo\n\n';
  assert.deepEqual(records(text), [
    { line: 1, fields: ["email", "city"] },
    { line: 2, fields: ["ann@example.com", 'Port\nTown, "the" harbour'] },
    { line: 4, fields: ["bob@example.com", "Oslo"] },
  ]);
});

test("an unclosed quote is an error naming its line", () => {
  assert.throws(() => records('email\n"ann@example.com\n'), (e) => e instanceof CsvError && /Line 2/.test(e.message));
});

test("columns: known names in any spelling, typed properties, and what is wrong with the header", () => {
  assert.deepEqual(columns(["E-mail", "First Name", "age:number"]), [
    { kind: "email", key: "email" }, { kind: "first_name", key: "first_name" }, { kind: "property", key: "age", type: "number" },
  ]);
  assert.throws(() => columns(["name"]), /no email column/);
  assert.throws(() => columns(["email", "email"]), /named twice/);
  assert.throws(() => columns(["email", "age:date"]), /string, number or boolean/);
  assert.throws(() => columns(["email", "1st"]), /property name/);
});

test("contactsOf: typed values, empty cells set nothing, bad rows told by their line", () => {
  const { rows, errors } = contactsOf(
    "email,first_name,unsubscribed,age:number,vip:boolean\n"
    + "ann@example.com,Ann,yes,42,no\n"
    + "bob@example.com,,,,\n"
    + "cat@example.com,Cat,maybe,1,true\n"
    + "dan@example.com,Dan,no,old,true\n"
    + "eve@example.com,Eve\n");
  assert.deepEqual(rows, [
    { line: 2, email: "ann@example.com", contact: { email: "ann@example.com", first_name: "Ann", unsubscribed: true, properties: { age: 42, vip: false } } },
    { line: 3, email: "bob@example.com", contact: { email: "bob@example.com" } },
  ]);
  assert.deepEqual(errors.map((e) => [e.line, e.email, e.message.split(":")[0]]), [
    [4, "cat@example.com", "unsubscribed"], [5, "dan@example.com", "properties.age"], [6, "eve@example.com", "2 fields; the header has 5."],
  ]);
  assert.throws(() => contactsOf(""), /empty/);
});

test("batches hold at most BATCH_ROWS rows, in order", () => {
  const rows = Array.from({ length: BATCH_ROWS * 2 + 1 }, (_, i) => ({ line: i + 2, contact: { email: `p${i}@example.com` } }));
  const out = batches(rows);
  assert.deepEqual(out.map((b) => b.length), [BATCH_ROWS, BATCH_ROWS, 1]);
  assert.deepEqual(out.flat(), rows);
});

test("batches stay under the byte limit whatever the rows hold", () => {
  const big = "x".repeat(200 * 1024);
  const rows = Array.from({ length: 10 }, (_, i) => ({ line: i + 2, contact: { email: `p${i}@example.com`, properties: { note: big } } }));
  const out = batches(rows);
  assert.ok(out.length >= 3 && out.every((b) => JSON.stringify(b.map((r) => r.contact)).length < 950 * 1024));
});

test("rowMessage drops the batch's index prefix", () => {
  assert.equal(rowMessage("contacts[12].email: not an address"), "email: not an address");
  assert.equal(rowMessage(undefined), "");
});
