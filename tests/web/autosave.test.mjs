// A draft saved by itself after the typing stops, with undo (mailsvc/web/autosave.js), under
// node with fake timers.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Autosave, addressList, stateWords } from "../../mailsvc/web/autosave.js";

function fakeTimers() {
  let next = 1;
  const pending = new Map();
  return {
    setTimeout(fn, ms) { const id = next++; pending.set(id, { fn, ms }); return id; },
    clearTimeout(id) { pending.delete(id); },
    pending,
    async fire() {
      const due = [...pending.entries()];
      pending.clear();
      for (const [, { fn }] of due) fn();
      await new Promise((resolve) => { setImmediate(resolve); });
    },
  };
}

function draft(first, fail = () => false) {
  const timers = fakeTimers();
  const saves = [], states = [];
  const save = async (value) => { if (fail(value)) throw new Error("refused"); saves.push(value); };
  const edits = new Autosave(first, save, { timers, delay: 1000, onState: (state) => states.push(state) });
  return { edits, timers, saves, states };
}

test("typing is saved once, a second after the last keystroke", async () => {
  const { edits, timers, saves, states } = draft({ subject: "A" });
  edits.edit({ subject: "AB" });
  edits.edit({ subject: "ABC" });
  assert.equal(timers.pending.size, 1);
  assert.equal([...timers.pending.values()][0].ms, 1000);
  assert.equal(edits.state, "unsaved");
  assert.ok(edits.dirty);
  await timers.fire();
  assert.deepEqual(saves, [{ subject: "ABC" }]);
  assert.equal(edits.state, "saved");
  assert.ok(!edits.dirty);
  assert.deepEqual(states, ["unsaved", "unsaved", "saving", "saved"]);
});

test("an edit back to the saved value is no change: nothing is saved", async () => {
  const { edits, timers, saves } = draft({ subject: "A" });
  edits.edit({ subject: "AB" });
  edits.edit({ subject: "A" });
  assert.equal(timers.pending.size, 0);
  assert.equal(edits.state, "saved");
  await edits.flush();
  assert.deepEqual(saves, []);
});

test("undo drops unsaved changes first, then restores and saves the previous saved value", async () => {
  const { edits, timers, saves } = draft({ subject: "one" });
  edits.edit({ subject: "two" });
  await timers.fire();
  edits.edit({ subject: "two and a half" });
  assert.deepEqual(await edits.undo(), { subject: "two" });
  assert.equal(timers.pending.size, 0);
  assert.deepEqual(saves, [{ subject: "two" }]);
  assert.deepEqual(await edits.undo(), { subject: "one" });
  assert.deepEqual(saves, [{ subject: "two" }, { subject: "one" }]);
  assert.equal(edits.state, "saved");
  assert.equal(await edits.undo(), null, "nothing older to go back to");
});

test("a refused save is told and kept on screen, and saved once it is accepted", async () => {
  let refuse = true;
  const { edits, timers, saves } = draft({ subject: "A" }, () => refuse);
  edits.edit({ subject: "" });
  await timers.fire();
  assert.equal(edits.state, "failed");
  assert.equal(edits.error.message, "refused");
  assert.ok(edits.dirty);
  refuse = false;
  await edits.flush();
  assert.deepEqual(saves, [{ subject: "" }]);
  assert.equal(edits.state, "saved");
});

test("each state has its words", () => {
  assert.equal(stateWords("saved"), "Saved.");
  assert.equal(stateWords("unsaved"), "Unsaved changes…");
  assert.equal(stateWords("saving"), "Saving…");
});

test("a field of addresses separated by commas is the API's list", () => {
  assert.deepEqual(addressList(" a@example.com, ,b@example.com "), ["a@example.com", "b@example.com"]);
  assert.deepEqual(addressList(""), []);
});
