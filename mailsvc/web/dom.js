// Building the page: every string goes in as text (textContent, attribute values), never as
// markup, so that nothing a user or a sender wrote can become HTML or script; and a link or a
// source is only ever an http(s) or mailto URL or a path of this origin, never javascript: or
// data: (a webhook endpoint or a download URL is data too). No DOM is touched at import, so that
// tests/web/ can run safeUrl under node.

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
  node.append(child instanceof Node ? child : document.createTextNode(String(child)));
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
export function h(spec, attrs, ...children) {
  const [head, ...classes] = spec.split(".");
  const [tag, id] = head.split("#");
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

/** A table of ``rows``; with none, one row saying ``empty`` (what to do next, where it helps). */
export function table(headers, rows, caption, empty = "None.") {
  return h("div.table-wrap",
    h("table",
      caption ? h("caption", caption) : null,
      h("thead", h("tr", headers.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", rows.length ? rows : h("tr.empty", h("td", { colspan: headers.length, class: "muted" }, empty)))));
}

export function badge(text) {
  return h(`span.badge.b-${String(text).replace(/[^a-z_]/g, "")}`, String(text));
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

export function when(text) {
  if (!text) return "—";
  const date = new Date(String(text).replace(" ", "T").replace(/\+00$/, "Z"));
  return Number.isNaN(date.getTime()) ? String(text) : date.toLocaleString();
}
