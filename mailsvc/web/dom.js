// Building the page: every string goes in as text (textContent, attribute values), never as
// markup, so that nothing a user or a sender wrote can become HTML or script; and a link or a
// source is only ever an http(s) or mailto URL or a path of this origin, never javascript: or
// data: (a webhook endpoint or a download URL is data too). No DOM is touched at import, so that
// tests/web/ can run safeUrl under node.

import { shownText } from "./display.js";
import { stateText } from "./words.js";

const SVG = "http://www.w3.org/2000/svg";
const SCHEMES = ["http:", "https:", "mailto:"];
const URL_ATTRIBUTES = new Set(["href", "src", "action", "formaction", "poster", "xlink:href"]);

/** ``value`` if, read against ``base`` (the page), it is an http(s) or mailto URL (a path or a
 *  #route of the page is one), else null. */
export function safeUrl(value, base = globalThis.location ? globalThis.location.href : undefined) {
  let url;
  try { url = new URL(String(value), base); } catch { return null; }
  return SCHEMES.includes(url.protocol) ? String(value) : null;
}

function put(node, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) { child.forEach((c) => put(node, c)); return; }
  // Shown as it reads (web/display.js: a U+202E in a subject or file name reverses nothing); a
  // textarea's text is its value, edited and saved, so it is kept exactly.
  if (child instanceof Node) node.append(child);
  else node.append(document.createTextNode(node.localName === "textarea" ? String(child) : shownText(child)));
}

function set(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (URL_ATTRIBUTES.has(name) && safeUrl(value) === null) {
      // Refused: the link or frame stays inert rather than the whole page failing.
      continue;
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  return node;
}

/** h("tag.class", {attr: value, onclick: fn}, ...children) */
/** A spec's tag, id and classes ("section#edit.card", "section.card#edit": the same), in any order after the tag. */
export function parseSpec(spec) {
  const tag = spec.match(/^[^.#]*/)[0] || "div";
  const id = (spec.match(/#([^.#]+)/) || [])[1];
  const classes = [...spec.matchAll(/\.([^.#]+)/g)].map((m) => m[1]);
  return { tag, id, classes };
}

export function h(spec, attrs, ...children) {
  const { tag, id, classes } = parseSpec(spec);
  const node = document.createElement(tag);
  if (id) node.id = id;
  if (attrs && (attrs instanceof Node || typeof attrs !== "object" || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = {};
  }
  set(node, attrs);
  if (classes.length) node.classList.add(...classes);
  put(node, children);
  return node;
}

export function svg(tag, attrs, ...children) {
  const node = set(document.createElementNS(SVG, tag), attrs);
  put(node, children);
  return node;
}

let ids = 0;
/** A labelled field: a label bound to its input by id. */
export function field(label, input, hint) {
  const id = input.id || `f${++ids}`;
  input.id = id;
  const parts = [h("label", { for: id }, label), input];
  if (hint) {
    const hintId = `${id}-hint`;
    input.setAttribute("aria-describedby", hintId);
    parts.push(h("small.hint", { id: hintId }, hint));
  }
  return h("div.field", parts);
}

/** A table of ``rows``; with none, one row saying ``empty`` (what to do next, where it helps).
 *  Each body cell carries its column's name (data-label): on a phone the rows are cards, each
 *  cell after its column's name (style.css). A column without a name (its buttons) is named
 *  "Actions" for screen readers alone, and its cells carry no name on a phone. */
export function table(headers, rows, caption, empty = "None.") {
  const node = h("div.table-wrap",
    h("table",
      caption ? h("caption", caption) : null,
      h("thead", h("tr", headers.map((x) => h("th", { scope: "col" }, x || h("span.sr-only", "Actions"))))),
      h("tbody", rows.length ? rows : h("tr.empty", h("td", { colspan: headers.length, class: "muted" }, empty)))));
  return labelled(node);
}

/** Gives each body cell of ``node``'s table the name of its column (data-label). */
export function labelled(node) {
  const heads = [...node.querySelectorAll("thead th")].map((th) => (th.querySelector(".sr-only") ? "" : th.textContent));
  node.querySelectorAll("tbody tr:not(.empty)").forEach((row) => {
    [...row.cells].forEach((cell, i) => { if (heads[i] && !cell.hasAttribute("data-label")) cell.dataset.label = heads[i]; });
  });
  return node;
}

/** A value on one line, cut with an ellipsis where it does not fit, whole in its title. */
export function clip(text, spec = "span") {
  const value = String(text ?? "");
  return h(`${spec}.clip`, { title: value }, value);
}

/** An id or an address: on one line (clipped) with a button copying it whole. */
export function copyable(text, label = "Copy") {
  return [clip(text), " ", copyButton(String(text ?? ""), label)];
}

/** A state, status or origin code in words (words.js), the code in its title. */
export function badge(code) {
  return h(`span.badge.b-${String(code).replace(/[^a-z_]/g, "")}`, { title: String(code) }, stateText(code));
}

export function copyButton(text, label = "Copy") {
  const button = h("button.secondary.small", { type: "button", "aria-label": `${label}: ${text}` }, label);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  });
  return button;
}

/** The instant an API time names (ISO 8601, or PostgreSQL's "2026-12-02 06:00:00+00"), or
 *  null when it names none. */
export function instant(text) {
  if (!text) return null;
  const date = new Date(String(text).replace(" ", "T").replace(/(:\d\d(?:\.\d+)?[+-]\d\d)$/, "$1:00"));
  return Number.isNaN(date.getTime()) ? null : date;
}

export function when(text) {
  if (!text) return "—";
  const date = instant(text);
  return date ? date.toLocaleString() : String(text);
}

/** A moment as a <time>: how long ago in words ("5 min ago"), the exact time in its title; told
 *  again as it ages while the page stays open (``retell``). */
export function ago(text, now = Date.now()) {
  if (!text) return "—";
  const date = instant(text);
  if (!date) return String(text);
  return h("time.ago", { datetime: date.toISOString(), title: date.toLocaleString() }, relative(date.getTime(), now));
}

/** Tells every relative time under ``root`` again against ``now`` (a page left open a while). */
export function retell(root, now = Date.now()) {
  root.querySelectorAll("time.ago[datetime]").forEach((node) => {
    node.textContent = relative(new Date(node.getAttribute("datetime")).getTime(), now);
  });
}

/** ``then`` against ``now`` (milliseconds) in words: "just now", "5 min ago", "3 h ago", "2 days ago",
 *  "in 4 min" for a moment to come; a month or more away, the date. */
export function relative(then, now) {
  const seconds = Math.round((now - then) / 1000);
  const away = Math.abs(seconds);
  const say = (n, unit) => (seconds >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`);
  if (away < 45) return seconds >= 0 ? "just now" : "in a moment";
  if (away < 3600) return say(Math.max(1, Math.round(away / 60)), "min");
  if (away < 86400) return say(Math.round(away / 3600), "h");
  const days = Math.round(away / 86400);
  if (days < 30) return say(days, days === 1 ? "day" : "days");
  return new Date(then).toISOString().slice(0, 10);
}
