// The builder's editing canvas: the document's blocks drawn in the dashboard's own page (the
// sandboxed preview stays the true rendering), a block selected by a click, its text edited where
// it stands (headings, paragraphs, quotes and footers keep their bold, italic and links: Ctrl+B,
// Ctrl+I, Ctrl+K or the marks bar, whose link form asks for the address and refuses a bad one),
// moved by drag and drop (its handle) or Alt+↑/↓, a "+" between blocks opening the palette of block types.
// Every string goes in as text (web/dom.js); styles are set through the CSSOM, never as markup.

import { field, h, safeUrl } from "/ui/dom.js";
import { inkOn, insertAt, linkOf, locate, moveBy, moveTo, remove, runsOf, setRuns, tidyRuns } from "/ui/builderdoc.js";

export const TYPES = ["heading", "text", "button", "image", "divider", "spacer", "columns", "list", "quote", "code", "social", "footer"];
const MARKED = new Set(["heading", "text", "quote", "footer"]);
const PLAIN = { button: "label", code: "text" };
const SINGLE_LINE = new Set(["heading", "button"]);

/** The canvas of ``ctx.doc()``: ``ctx`` gives ``doc()``, ``selected()``, ``select(id)``,
 *  ``focus(id)``, ``change(mutate, keep)`` (``keep``: the view not to draw again) and ``newBlock(type)``. */
export function canvas(ctx) {
  const node = new Drawing(ctx).list(ctx.doc().blocks, 1);
  node.classList.add("canvas");
  node.id = "canvas";
  return node;
}

/** One drawing of the canvas: the block being dragged is its state. */
class Drawing {
  constructor(ctx) { this.ctx = ctx; this.dragging = null; }

  list(blocks, depth) {
    const holder = h("div.canvaslist", { role: "list" });
    blocks.forEach((block, index) => holder.append(this.gap(blocks, index, depth), this.item(blocks, block, index, depth)));
    holder.append(this.gap(blocks, blocks.length, depth));
    return holder;
  }
  drop(target, blocks, index) {
    target.addEventListener("dragover", (e) => { if (this.dragging) { e.preventDefault(); target.classList.add("dropping"); } });
    target.addEventListener("dragleave", () => target.classList.remove("dropping"));
    target.addEventListener("drop", (e) => {
      e.preventDefault(); e.stopPropagation();
      const id = this.dragging; this.dragging = null;
      if (id) this.ctx.change(() => moveTo(this.ctx.doc().blocks, id, blocks, index));
    });
  }
  gap(blocks, index, depth) {
    const palette = h("div.palette", { role: "group", "aria-label": "Block types", hidden: true },
      TYPES.filter((t) => t !== "columns" || depth < 3).map((type) => h("button.secondary.small", {
        type: "button", "data-insert": type,
        onclick: () => { const block = this.ctx.newBlock(type); this.ctx.change(() => insertAt(blocks, index, block)); this.ctx.select(block.id); this.ctx.focus(block.id); },
      }, type)));
    const plus = h("button.plus", { type: "button", "aria-expanded": "false", "aria-label": `Insert a block at ${index + 1}`, title: "Insert a block" }, "+");
    plus.addEventListener("click", () => {
      palette.hidden = !palette.hidden;
      plus.setAttribute("aria-expanded", String(!palette.hidden));
    });
    palette.addEventListener("keydown", (e) => {
      if (e.key === "Escape") { palette.hidden = true; plus.setAttribute("aria-expanded", "false"); plus.focus(); }
    });
    const node = h("div.gap", plus, palette);
    this.drop(node, blocks, index);
    return node;
  }
  item(blocks, block, index, depth) {
    const node = h(`div.cblock.t-${block.type}`, {
      role: "listitem", tabindex: "0", "data-block": block.id, "data-type": block.type,
      "aria-label": `${block.type} block, ${index + 1} of ${blocks.length}. Alt+Arrow keys move it, Delete removes it.`, "aria-current": this.ctx.selected() === block.id ? "true" : null,
    }, h("span.chandle", { draggable: "true", title: "Drag to move", "aria-hidden": "true" }, "⠿"), this.body(block, depth));
    if (this.ctx.selected() === block.id) node.classList.add("selected");
    // A button's colours are the button's own, as in the e-mail; a block's are its row's.
    const label = block.type === "button" ? node.querySelector(".cbutton") : null;
    const brand = this.ctx.doc().theme && this.ctx.doc().theme.brand_color;
    paint(node, label && brand ? { background: brand, ...block.style } : block.style, label || node);
    node.addEventListener("click", (e) => { e.stopPropagation(); if (this.ctx.selected() !== block.id) this.ctx.select(block.id); });
    node.addEventListener("focus", (e) => { if (e.target === node && this.ctx.selected() !== block.id) this.ctx.select(block.id); });
    node.addEventListener("keydown", (e) => {
      if (e.target !== node) return;
      const by = e.altKey && e.key === "ArrowUp" ? -1 : e.altKey && e.key === "ArrowDown" ? 1 : 0;
      if (by) {
        e.preventDefault();
        if (index + by >= 0 && index + by < blocks.length) this.ctx.change(() => moveBy(this.ctx.doc().blocks, block.id, by));
        this.ctx.focus(block.id);
      }
      if (e.key === "Delete") { e.preventDefault(); this.ctx.change(() => remove(this.ctx.doc().blocks, block.id)); this.ctx.select(null); }
    });
    // Dragged by its handle: text in the block stays selectable with the mouse.
    node.firstChild.addEventListener("dragstart", (e) => {
      e.stopPropagation(); this.dragging = block.id;
      e.dataTransfer.setData("text/plain", block.id);
      e.dataTransfer.setDragImage(node, 12, 12);
    });
    this.drop(node, blocks, index);
    return node;
  }
  body(block, depth) {
    if (MARKED.has(block.type)) {
      const tag = { heading: `h${block.level || 1}`, quote: "blockquote", footer: "p.cfooter" }[block.type] || "p";
      const node = this.editable(h(tag, runsOf(block).map(drawRun)), block, "true");
      return block.type === "footer" && block.unsubscribe ? [node, h("p.cfooter.muted", block.unsubscribe_label || "Unsubscribe")] : node;
    }
    if (PLAIN[block.type]) {
      const tag = { button: "span.cbutton", code: "pre" }[block.type];
      return this.editable(h(tag, block[PLAIN[block.type]] || ""), block, "plaintext-only");
    }
    switch (block.type) {
      case "image": return picture(block);
      case "divider": { const line = h("hr"); line.style.borderTopWidth = `${block.thickness || 1}px`; return line; }
      case "spacer": { const space = h("div.cspacer", { "aria-hidden": "true" }); space.style.height = `${block.height || 24}px`; return space; }
      case "columns": return h("div.ccolumns", block.columns.map((column) => h("div.ccolumn", this.list(column.blocks, depth + 1))));
      case "list": return h(block.ordered ? "ol" : "ul", (block.items || []).map((runs) => h("li", runs.map(drawRun))));
      case "social": return h("p.csocial", (block.links || []).map((link) => h("span.badge", link.network)));
      default: return h("p.muted", block.type);
    }
  }
  /** A block's text, editable in place; its runs are read back when the caret leaves. */
  editable(node, block, mode) {
    node.setAttribute("contenteditable", mode);
    node.setAttribute("aria-label", `${block.type} text`);
    node.classList.add("editable");
    node.addEventListener("paste", (e) => {
      e.preventDefault();
      document.execCommand("insertText", false, e.clipboardData.getData("text/plain"));
    });
    // Nothing dropped goes into the text as markup (a block dropped here is the block's drop).
    node.addEventListener("drop", (e) => e.preventDefault());
    node.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && SINGLE_LINE.has(block.type)) { e.preventDefault(); node.blur(); }
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "k" && mode === "true") { e.preventDefault(); mark("createLink"); }
      if (e.key === "Escape") node.blur();
    });
    node.addEventListener("focusout", () => {
      const live = locate(this.ctx.doc().blocks, block.id);
      if (!live) return;
      if (PLAIN[block.type]) {
        const value = node.textContent;
        if (value !== (live.block[PLAIN[block.type]] || "")) this.ctx.change(() => { live.block[PLAIN[block.type]] = value; }, "canvas");
        return;
      }
      const runs = readRuns(node);
      if (JSON.stringify(runs) !== JSON.stringify(runsOf(live.block))) {
        this.ctx.change(() => setRuns(live.block, runs), "canvas");
      }
    });
    return node;
  }
}

/** Bold, Italic and Link for the text being edited on the canvas (the keyboard's Ctrl+B, Ctrl+I,
 *  Ctrl+K, for a pointer or a phone): a press keeps the caret where it is. Link opens the bar's
 *  link form. */
export function marksBar() {
  const act = (label, command, key) => {
    const button = h("button.secondary.small", { type: "button", "aria-label": label, title: `${label} (Ctrl+${key})`, "data-mark": command }, label);
    button.addEventListener("mousedown", (e) => e.preventDefault());
    button.addEventListener("click", () => mark(command));
    return button;
  };
  linking = new LinkForm();
  return h("div.marks", h("div.marktools", { role: "toolbar", "aria-label": "Text marks" }, act("Bold", "bold", "B"),
    act("Italic", "italic", "I"), act("Link", "createLink", "K")), linking.node);
}

/** The link form of the page's marks bar (one a page). */
let linking = null;

/** Applies ``command`` to the selection in a marked editable text; a link asks for its URL. */
function mark(command) {
  const at = document.activeElement;
  if (!at || !at.isContentEditable || at.getAttribute("contenteditable") !== "true") return;
  if (command !== "createLink") document.execCommand(command);
  else if (linking) linking.open(at.closest("[contenteditable]"));
}

/** The address of a link for the text selected in an editable: the selection is kept while the
 *  address is typed and given back to the text on Apply (the link made), Remove link or Cancel;
 *  an address the e-mail cannot hold is refused there, saying why (builderdoc.js, linkOf). */
class LinkForm {
  constructor() {
    this.url = h("input", { type: "text", inputmode: "url", autocomplete: "off", spellcheck: "false" });
    this.said = h("p.refusal", { role: "alert" });
    this.node = h("form.linkform", { hidden: true, "aria-label": "Link" }, field("Link URL", this.url), h("div.inline",
      h("button.primary.small", { type: "submit" }, "Apply link"),
      h("button.secondary.small", { type: "button", onclick: () => this.done("unlink") }, "Remove link"),
      h("button.secondary.small", { type: "button", onclick: () => this.done(null) }, "Cancel")), this.said);
    this.node.addEventListener("submit", (e) => { e.preventDefault(); this.apply(); });
    this.node.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); this.done(null); } });
    this.text = null; this.range = null;
  }
  open(text) {
    const selection = getSelection();
    this.text = text;
    this.range = selection.rangeCount ? selection.getRangeAt(0).cloneRange() : null;
    const start = this.range && this.range.startContainer;
    const link = start && (start.nodeType === Node.ELEMENT_NODE ? start : start.parentNode).closest("a");
    this.url.value = link && text.contains(link) ? link.getAttribute("href") : "https://";
    this.said.textContent = "";
    this.url.removeAttribute("aria-invalid");
    this.node.hidden = false;
    this.url.focus();
    this.url.select();
  }
  apply() {
    const out = linkOf(this.url.value);
    if (out.error) { this.said.textContent = out.error; this.url.setAttribute("aria-invalid", "true"); this.url.focus(); return; }
    this.done("createLink", out.href);
  }
  /** Closes the form, the selection back in the text, ``command`` applied to it; the text is then
   *  left, so that the change is taken in (and undone) as one. */
  done(command, value) {
    this.node.hidden = true;
    const text = this.text; this.text = null;
    if (!text || !text.isConnected) return;
    text.focus();
    const selection = getSelection();
    if (this.range) { selection.removeAllRanges(); selection.addRange(this.range); }
    if (!command) return;
    document.execCommand(command, false, value);
    text.blur();
  }
}

/** An image: drawn when it is this origin's (the page loads nothing else); else its alt text in a frame. */
function picture(block) {
  let own = false;
  try { own = new URL(block.src, location.href).origin === location.origin && safeUrl(block.src) !== null; } catch { own = false; }
  if (own) {
    const img = h("img", { src: block.src, alt: block.alt || "" });
    if (block.width) img.style.width = `${Math.min(block.width, 600)}px`;
    return img;
  }
  return h("div.cimage", h("span", block.alt || "Image"), h("small.muted", block.src));
}

function drawRun(run) {
  let node = document.createTextNode(run.text);
  if (run.href) node = h("a", { href: run.href }, node);
  if (run.italic) node = h("em", node);
  if (run.bold) node = h("strong", node);
  return node;
}

/** The runs an edited element holds: bold from b/strong, italic from i/em, links from a; a line
 *  break or a new line's div (what Enter makes) is a "\n". */
export function readRuns(root) {
  const runs = [];
  const walk = (node, marks, first) => {
    if (node.nodeType === Node.TEXT_NODE) { runs.push({ ...marks, text: node.textContent }); return; }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const tag = node.localName;
    if (tag === "br") { runs.push({ ...marks, text: "\n" }); return; }
    if ((tag === "div" || tag === "p") && !first) runs.push({ ...marks, text: "\n" });
    const inner = { ...marks };
    if (tag === "b" || tag === "strong") inner.bold = true;
    if (tag === "i" || tag === "em") inner.italic = true;
    if (tag === "a" && safeUrl(node.getAttribute("href") || "")) inner.href = node.getAttribute("href");
    [...node.childNodes].forEach((child, i) => walk(child, inner, i === 0 && first));
  };
  [...root.childNodes].forEach((child, i) => walk(child, {}, i === 0));
  const text = runs.map((r) => r.text).join("");
  if (text.endsWith("\n")) runs[runs.length - 1].text = runs[runs.length - 1].text.replace(/\n$/, "");
  return tidyRuns(runs);
}

/** A block's style on its canvas node, its colours on ``colouredNode`` (the CSSOM: the page's CSP allows no style attribute). */
function paint(node, style, colouredNode = node) {
  if (!style) return;
  if (style.align) node.style.textAlign = style.align;
  if (style.color) colouredNode.style.color = style.color;
  if (style.background) colouredNode.style.background = style.background;
  if (style.background && !style.color) colouredNode.style.color = inkOn(style.background);
  if (style.font_size) node.style.fontSize = `${style.font_size}px`;
  if (style.padding) {
    const p = style.padding;
    node.style.padding = `${p.top || 0}px ${p.right || 0}px ${p.bottom || 0}px ${p.left || 0}px`;
  }
}
