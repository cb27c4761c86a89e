// The builder document's tree and history (mailsvc/web/builderdoc.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { History, giveIds, inkOn, insertAt, linkOf, locate, moveBy, moveTo, remove, setRuns, tidyRuns } from "../../mailsvc/web/builderdoc.js";

function sample() {
  return [
    { id: "a", type: "heading", text: "A" },
    { id: "cols", type: "columns", columns: [{ blocks: [{ id: "l1", type: "text", text: "x" }, { id: "l2", type: "text", text: "y" }] }, { blocks: [] }] },
    { id: "b", type: "text", text: "B" },
  ];
}
const ids = (list) => list.map((b) => b.id);

test("a block is found at the top and inside columns", () => {
  const blocks = sample();
  assert.equal(locate(blocks, "b").index, 2);
  const inner = locate(blocks, "l2");
  assert.equal(inner.list, blocks[1].columns[0].blocks);
  assert.equal(inner.index, 1);
  assert.equal(locate(blocks, "nope"), null);
});

test("Alt+arrow moves a block one place within its own list, and not past either end", () => {
  const blocks = sample();
  assert.equal(moveBy(blocks, "a", 1), true);
  assert.deepEqual(ids(blocks), ["cols", "a", "b"]);
  assert.equal(moveBy(blocks, "b", 1), false);
  assert.equal(moveBy(blocks, "cols", -1), false);
  assert.equal(moveBy(blocks, "l1", 1), true);
  assert.deepEqual(ids(blocks[0].columns[0].blocks), ["l2", "l1"]);
});

test("a drop moves a block before a position, across lists, never into itself", () => {
  const blocks = sample();
  assert.equal(moveTo(blocks, "a", blocks, 3), true);
  assert.deepEqual(ids(blocks), ["cols", "b", "a"]);
  assert.equal(moveTo(blocks, "b", blocks[0].columns[1].blocks, 0), true);
  assert.deepEqual(ids(blocks), ["cols", "a"]);
  assert.deepEqual(ids(blocks[0].columns[1].blocks), ["b"]);
  assert.equal(moveTo(blocks, "cols", blocks[0].columns[0].blocks, 0), false);
  assert.deepEqual(ids(blocks), ["cols", "a"]);
  assert.equal(moveTo(blocks, "l1", blocks, 0), true);
  assert.deepEqual(ids(blocks), ["l1", "cols", "a"]);
});

test("insert and remove", () => {
  const blocks = sample();
  insertAt(blocks, 1, { id: "new", type: "divider" });
  assert.deepEqual(ids(blocks), ["a", "new", "cols", "b"]);
  insertAt(blocks, 99, { id: "end", type: "spacer" });
  assert.equal(blocks[blocks.length - 1].id, "end");
  assert.equal(remove(blocks, "l1").id, "l1");
  assert.equal(remove(blocks, "l1"), null);
});

test("edited text stays plain text; marks make runs, neighbours with the same marks joined", () => {
  const block = { type: "text", text: "old" };
  setRuns(block, [{ text: "Hello " }, { text: "world", bold: false }]);
  assert.deepEqual(block, { type: "text", text: "Hello world" });
  setRuns(block, [{ text: "Hello " }, { text: "bo", bold: true }, { text: "ld", bold: true }, { text: "" }, { text: "!", href: null }]);
  assert.deepEqual(block, { type: "text", runs: [{ text: "Hello " }, { text: "bold", bold: true }, { text: "!" }] });
  assert.deepEqual(tidyRuns([{ text: "a", href: "https://x/" }, { text: "b", href: "https://y/" }]).length, 2);
});

test("the history undoes and redoes every recorded change; a new change forgets the redo", () => {
  const history = new History(3);
  let doc = { blocks: [] };
  assert.equal(history.undo(doc), null);
  for (const n of [1, 2, 3, 4]) { history.record(doc); doc = { blocks: [n] }; }
  assert.equal(history.canUndo, true);
  doc = history.undo(doc);
  assert.deepEqual(doc, { blocks: [3] });
  doc = history.undo(doc);
  doc = history.undo(doc);
  assert.deepEqual(doc, { blocks: [1] });
  assert.equal(history.undo(doc), null, "at most three states kept");
  doc = history.redo(doc);
  assert.deepEqual(doc, { blocks: [2] });
  history.record(doc); doc = { blocks: ["x"] };
  assert.equal(history.canRedo, false);
  assert.equal(history.redo(doc), null);
});

test("recording the same state twice keeps it once", () => {
  const history = new History();
  const doc = { blocks: [1] };
  history.record(doc); history.record(doc);
  assert.equal(history.past.length, 1);
});

test("the ink on a background is the one of black and white that contrasts more", () => {
  assert.equal(inkOn("#7c3aed"), "#ffffff");
  assert.equal(inkOn("#000000"), "#ffffff");
  assert.equal(inkOn("#fde68a"), "#000000");
  assert.equal(inkOn("#ffffff"), "#000000");
});

test("a link's address is an http(s) URL with a host, a mailto: one or a placeholder", () => {
  assert.deepEqual(linkOf(" https://acme.example/notes?from=mail "), { href: "https://acme.example/notes?from=mail" });
  assert.deepEqual(linkOf("mailto:docs@acme.example"), { href: "mailto:docs@acme.example" });
  assert.deepEqual(linkOf("{{{CTA_URL}}}"), { href: "{{{CTA_URL}}}" });
});

test("a link the e-mail cannot hold is refused, saying why", () => {
  assert.match(linkOf("javascript:alert(1)").error, /Only https:\/\/, http:\/\/ and mailto: links .*\(not javascript:\)/);
  assert.match(linkOf("data:text/html,hi").error, /not data:/);
  assert.match(linkOf("acme.example/notes").error, /^Only https:/);
  assert.match(linkOf("   ").error, /Type the link's address/);
  assert.match(linkOf("https://acme.example/a b").error, /no spaces/);
  assert.match(linkOf("https://").error, /not a valid address|needs a host/);
  assert.match(linkOf("mailto:").error, /after mailto:/);
});

test("blocks without an id are given one, in columns too; an id given is kept", () => {
  let n = 0;
  const blocks = [{ type: "heading", text: "A" }, { id: "kept", type: "columns", columns: [{ blocks: [{ type: "text", text: "x" }] }, { blocks: [] }] }];
  assert.equal(giveIds(blocks, () => `new${++n}`), blocks);
  assert.deepEqual([blocks[0].id, blocks[1].id, blocks[1].columns[0].blocks[0].id], ["new1", "kept", "new2"]);
  assert.equal(locate(blocks, "new2").block.text, "x");
});
