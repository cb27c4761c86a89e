// The theme's choice, kept per browser (mailsvc/web/theme.js), under node with a fake storage and root.
import assert from "node:assert/strict";
import { test } from "node:test";

import { KEY, apply, choose, effective, stored } from "../../mailsvc/web/theme.js";

function storage(initial = {}) {
  const kept = { ...initial };
  return { kept, getItem: (k) => (k in kept ? kept[k] : null), setItem: (k, v) => { kept[k] = String(v); } };
}

function root() {
  const attrs = {};
  return { attrs, setAttribute: (k, v) => { attrs[k] = v; }, removeAttribute: (k) => { delete attrs[k]; },
    getAttribute: (k) => (k in attrs ? attrs[k] : null) };
}

test("the kept choice, or Auto for none, an unknown one or a storage that refuses", () => {
  assert.equal(stored(storage({ [KEY]: "dark" })), "dark");
  assert.equal(stored(storage()), "auto");
  assert.equal(stored(storage({ [KEY]: "purple" })), "auto");
  assert.equal(stored({ getItem: () => { throw new Error("private mode"); } }), "auto");
  assert.equal(stored(undefined), "auto");
});

test("Light and Dark set data-theme; Auto leaves it to the system's preference", () => {
  const node = root();
  const kept = storage();
  choose("dark", kept, node);
  assert.equal(node.attrs["data-theme"], "dark");
  assert.equal(kept.kept[KEY], "dark");
  assert.equal(effective(node, () => ({ matches: false })), "dark");
  apply("auto", node);
  assert.equal(node.attrs["data-theme"], undefined);
  assert.equal(effective(node, () => ({ matches: true })), "dark");
  assert.equal(effective(node, () => ({ matches: false })), "light");
  choose("light", kept, node);
  assert.equal(effective(node, () => ({ matches: true })), "light");
});
