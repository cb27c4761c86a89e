// The builder document's pure side (docs/contract/dashboard.md, "Builder document"): finding a
// block in the tree of blocks and columns, moving, inserting and removing one, reading a
// paragraph's runs back, and the history of document states behind Undo and Redo. No DOM: the
// page (web/pages/builder.js) draws; tests/web/ checks this under node.

/** Where the block ``id`` sits: ``{list, index, block}`` (``list`` is the array holding it: the
 *  document's blocks or a column's), or null. */
export function locate(blocks, id) {
  for (let index = 0; index < blocks.length; index += 1) {
    const block = blocks[index];
    if (block.id === id) return { list: blocks, index, block };
    for (const column of block.columns || []) {
      const found = locate(column.blocks, id);
      if (found) return found;
    }
  }
  return null;
}

/** Gives each block in the tree that has none an id from ``newId()`` (a document from the API or
 *  the AI may come without): the canvas selects, moves and edits a block by its id. */
export function giveIds(blocks, newId) {
  for (const block of blocks) {
    if (!block.id) block.id = newId();
    for (const column of block.columns || []) giveIds(column.blocks, newId);
  }
  return blocks;
}

/** Moves the block ``id`` ``by`` places within its list (Alt+↑ is -1); false at either end. */
export function moveBy(blocks, id, by) {
  const at = locate(blocks, id);
  if (!at) return false;
  const to = at.index + by;
  if (to < 0 || to >= at.list.length) return false;
  at.list.splice(at.index, 1);
  at.list.splice(to, 0, at.block);
  return true;
}

/** True when ``list`` is one of ``outer``'s columns, or inside one (a block cannot go into itself). */
function within(outer, list) {
  return (outer.columns || []).some((column) => column.blocks === list
    || column.blocks.some((block) => within(block, list)));
}

/** Moves the block ``id`` into ``list`` before position ``index`` (its end when past it), as a
 *  drop does; false when ``list`` lies inside the block itself. */
export function moveTo(blocks, id, list, index) {
  const at = locate(blocks, id);
  if (!at || within(at.block, list)) return false;
  at.list.splice(at.index, 1);
  let to = index;
  if (at.list === list && at.index < index) to -= 1;
  list.splice(Math.max(0, Math.min(to, list.length)), 0, at.block);
  return true;
}

/** Puts ``block`` into ``list`` at ``index`` (clamped). */
export function insertAt(list, index, block) {
  list.splice(Math.max(0, Math.min(index, list.length)), 0, block);
  return block;
}

/** Takes the block ``id`` out of the tree; answers it, or null. */
export function remove(blocks, id) {
  const at = locate(blocks, id);
  if (!at) return null;
  at.list.splice(at.index, 1);
  return at.block;
}

/** Runs as the document keeps them: neighbours with the same marks joined, empty ones dropped,
 *  false marks and a null link left out. */
export function tidyRuns(runs) {
  const out = [];
  for (const run of runs) {
    if (!run.text) continue;
    const tidy = { text: run.text };
    if (run.bold) tidy.bold = true;
    if (run.italic) tidy.italic = true;
    if (run.href) tidy.href = run.href;
    const last = out[out.length - 1];
    if (last && !!last.bold === !!tidy.bold && !!last.italic === !!tidy.italic && last.href === tidy.href) last.text += tidy.text;
    else out.push(tidy);
  }
  return out;
}

/** A block's text as runs: its ``runs``, else its ``text`` as one plain run. */
export function runsOf(block) {
  if (Array.isArray(block.runs)) return block.runs;
  return block.text ? [{ text: block.text }] : [];
}

/** Sets a block's content from ``runs``: plain text stays ``text``; marks make it ``runs``. */
export function setRuns(block, runs) {
  const tidy = tidyRuns(runs);
  if (tidy.every((run) => !run.bold && !run.italic && !run.href)) {
    delete block.runs;
    block.text = tidy.map((run) => run.text).join("");
  } else {
    delete block.text;
    block.runs = tidy;
  }
}

/** The link a typed address makes: ``{href}`` for an http(s) URL with a host, a mailto: one or a
 *  {{{PLACEHOLDER}}}, else ``{error}`` saying why, as the server's check of a run's link does
 *  (mailsvc/domain/documents.py, LINK_SCHEMES). */
export function linkOf(given) {
  const text = String(given).trim();
  if (!text) return { error: "Type the link's address (https://…, mailto:…)." };
  if (/^\{\{\{[\w|. -]+\}\}\}$/.test(text)) return { href: text };
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text);
  const kind = scheme ? scheme[1].toLowerCase() : null;
  if (!["https", "http", "mailto"].includes(kind)) {
    return { error: `Only https://, http:// and mailto: links go in an e-mail${kind ? ` (not ${kind}:)` : ""}.` };
  }
  if (/[\s<>"\\]/.test(text)) return { error: "A link has no spaces, quotes or angle brackets." };
  let url;
  try { url = new URL(text); } catch { return { error: "This is not a valid address." }; }
  if (kind !== "mailto" && !url.hostname) return { error: "The address needs a host (https://example.com/…)." };
  if (kind === "mailto" && text.length <= "mailto:".length) return { error: "Name an address after mailto:." };
  return { href: text };
}

/** Black or white, whichever reads better on the colour ``hex`` (#rrggbb): WCAG's relative luminance. */
export function inkOn(hex) {
  const channel = (i) => {
    const v = parseInt(hex.slice(i, i + 2), 16) / 255;
    return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  const lum = 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
  return (1.05 / (lum + 0.05)) >= ((lum + 0.05) / 0.05) ? "#ffffff" : "#000000";
}

/** The states a document went through, as JSON: ``record`` before each change, ``undo`` and
 *  ``redo`` step through them (a new change forgets what could be redone). At most ``limit`` kept. */
export class History {
  constructor(limit = 200) { this.limit = limit; this.past = []; this.future = []; }

  get canUndo() { return this.past.length > 0; }

  get canRedo() { return this.future.length > 0; }

  /** Keeps ``doc`` as it is before a change. */
  record(doc) {
    const state = JSON.stringify(doc);
    if (this.past[this.past.length - 1] === state) return;
    this.past.push(state);
    this.future.length = 0;
    if (this.past.length > this.limit) this.past.shift();
  }

  /** The state before ``doc`` (a new object), or null when there is none. */
  undo(doc) {
    if (!this.past.length) return null;
    this.future.push(JSON.stringify(doc));
    return JSON.parse(this.past.pop());
  }

  /** The state undone last, or null. */
  redo(doc) {
    if (!this.future.length) return null;
    this.past.push(JSON.stringify(doc));
    return JSON.parse(this.future.pop());
  }
}
