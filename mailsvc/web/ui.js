// What every page shares, on the dashboard and on the operator console alike: the session (read
// once, by GET /me, then kept until sign-out or a 401), the frame around a page (header,
// navigation), the hash router, and the small builders of forms and buttons. A page is a module
// exporting ``routes`` ([pattern, page], the page answering the nodes to show) and, to be in the
// navigation, ``nav`` ([hash, label]); app.js lists the modules in navigation order and names
// its site's session paths (``start``). docs/decisions.md, "Web UI".

import { ApiError, get, post, session } from "/ui/api.js";
import { Autosave, stateWords } from "/ui/autosave.js";
import { h, retell } from "/ui/dom.js";
import { CHOICES, apply, choose, stored } from "/ui/theme.js";
import { errorText } from "/ui/words.js";

const app = document.getElementById("app");
let NAV = [];
let PAGES = [];
let OPEN = [];
// The site's session paths and header: the dashboard's unless ``start`` is told otherwise.
let SITE = {
  me: "/me",
  logout: "/auth/logout",
  brand: "mailsvc",
  who: (me) => `${me.email} · ${me.account.name}`,
};

// The frame

function main(...children) {
  return h("main#main", { id: "main", tabindex: "-1" }, children);
}

export function shell(current, ...content) {
  const me = session.me;
  const toggle = h("button.menu-toggle.secondary", { type: "button", "aria-expanded": "false", "aria-controls": "nav" }, "Menu");
  const nav = h("nav#nav", { id: "nav", "aria-label": "Sections" },
    h("ul", NAV.map(([href, label]) => h("li", h("a", {
      href, "aria-current": href === current ? "page" : null,
    }, label)))));
  drawer(toggle, nav);
  const signOut = h("button.secondary", { type: "button", id: "sign-out" }, "Sign out");
  signOut.addEventListener("click", signOutNow);
  return [
    h("a.skip", { href: "#main", onclick: (e) => { e.preventDefault(); document.getElementById("main").focus(); } },
      "Skip to content"),
    h("header.top", h("strong.brand", SITE.brand), toggle, h("span.who", me ? SITE.who(me) : ""), themeSwitch(), signOut),
    h("div.layout", nav, main(content)),
  ];
}

/** The open drawer's close (focus back on its Menu button), or null: Escape closes it wherever
 *  the focus is (one listener, on the document, for every page drawn). */
let closeDrawer = null;

/** On a small screen the navigation is a drawer: the Menu button opens it (focus on its first
 *  link), and it closes again by the button, Escape, or a link followed. A link to the page shown
 *  reads it again. */
function drawer(toggle, nav) {
  const show = (open, focus) => {
    nav.classList.toggle("open", open);
    toggle.setAttribute("aria-expanded", String(open));
    closeDrawer = open ? () => show(false, true) : null;
    if (open && focus) nav.querySelector("a").focus();
    if (!open && focus) toggle.focus();
  };
  closeDrawer = null;  // a page drawn anew starts with its drawer closed
  toggle.addEventListener("click", () => show(!nav.classList.contains("open"), true));
  nav.addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link) return;
    show(false, false);
    // The page shown, asked for again (no hashchange): read again, so that its figures are now's.
    if (link.getAttribute("href") === (location.hash || "#/")) route();
  });
}

/** The theme: Auto (the system's), Light or Dark, kept per browser (theme.js). */
function themeSwitch() {
  const chosen = stored(globalThis.localStorage);
  const node = h("select.theme-switch", { "aria-label": "Theme", title: "Colour theme" },
    CHOICES.map(([value, label]) => h("option", { value, selected: value === chosen }, label)));
  node.addEventListener("change", () => choose(node.value, globalThis.localStorage, document.documentElement));
  return node;
}

/** A page's title with its main actions beside it ("New …"). */
export function heading(title, ...tools) {
  return h("div.pagehead", h("h1", title), tools);
}

/** A list page's "New …" button and the card it opens: the page opens on its list, the form
 *  hidden until asked for (open at once when the list is still empty: it is what to do next).
 *  Escape in the card closes it, focus back on the button. */
export function opener(label, card, open = false) {
  if (!card.id) card.id = `new-${label.toLowerCase().replace(/[^a-z]+/g, "-")}`;
  card.hidden = !open;
  const button = h("button.primary", { type: "button", "aria-expanded": String(open), "aria-controls": card.id }, label);
  const show = (shown) => {
    card.hidden = !shown;
    button.setAttribute("aria-expanded", String(shown));
  };
  button.addEventListener("click", () => {
    show(card.hidden);
    if (!card.hidden) {
      const first = card.querySelector("input, select, textarea");
      if (first) first.focus();
    }
  });
  card.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.defaultPrevented) return;
    show(false);
    button.focus();
  });
  return button;
}

/** The links to a list's newer and older pages ({newer, older}: hashes, or null where there is
 *  no such page); nothing when the list is one page. */
export function pager(label, { newer, older }) {
  if (!newer && !older) return null;
  return h("div.pager", { role: "navigation", "aria-label": label },
    newer ? h("a.button", { href: newer }, "← Newer") : null, older ? h("a.button", { href: older }, "Older →") : null);
}

function render(nodes) {
  app.replaceChildren(...[nodes].flat());
  const target = document.querySelector("main h1");
  if (target) { target.setAttribute("tabindex", "-1"); target.focus({ preventScroll: true }); }
}

/** An error as an alert: its words, then its code ("… (validation_error)"). */
export function notice(error) {
  const code = error instanceof ApiError ? error.code : null;
  return h("p.error", { role: "alert" }, errorText(error && error.message, code));
}

// Forms and buttons

export function form(onsubmit, ...children) {
  const node = h("form", children);
  const status = h("div.status", { role: "status", "aria-live": "polite" });
  node.append(status);
  node.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.replaceChildren();
    const button = node.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    try {
      const shown = await onsubmit(new FormData(node), node);
      if (shown) status.replaceChildren(shown);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401 && session.me) return toLogin();
      status.replaceChildren(notice(error));
    } finally {
      if (button) button.disabled = false;
    }
  });
  return node;
}

export function input(name, attrs = {}) {
  return h("input", { name, type: "text", ...attrs });
}

export function select(name, options, value) {
  return h("select", { name }, options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
}

export function action(label, fn, cls = "secondary small") {
  const button = h(`button.${cls.split(" ").join(".")}`, { type: "button", title: label.length > 24 ? label : null }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try { await fn(); } catch (error) { button.after(notice(error)); } finally { button.disabled = false; }
  });
  return button;
}

/** Panels behind a row of tabs (the WAI-ARIA tabs pattern): ``panels`` is [[label, nodes]], the
 *  first shown; arrows, Home and End move between the tabs. */
export function tabs(label, panels) {
  const buttons = panels.map(([name], i) => h("button.tab", { type: "button", role: "tab", id: `tab-${i}`,
    "aria-controls": `panel-${i}`, "aria-selected": "false", tabindex: "-1" }, name));
  const boxes = panels.map(([, nodes], i) => h("div.tabpanel", { role: "tabpanel", id: `panel-${i}`,
    "aria-labelledby": `tab-${i}`, tabindex: "0" }, nodes));
  const show = (i, focus) => {
    buttons.forEach((b, j) => { b.setAttribute("aria-selected", String(i === j)); b.tabIndex = i === j ? 0 : -1; });
    boxes.forEach((box, j) => { box.hidden = i !== j; });
    if (focus) buttons[i].focus();
  };
  buttons.forEach((button, i) => {
    button.addEventListener("click", () => show(i, false));
    button.addEventListener("keydown", (event) => {
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: buttons.length - 1 }[event.key];
      if (to === undefined) return;
      event.preventDefault();
      show((to + buttons.length) % buttons.length, true);
    });
  });
  show(0, false);
  return h("div.tabset", h("div.tabs", { role: "tablist", "aria-label": label }, buttons), boxes);
}

// On a phone these tables scroll sideways in their box rather than break every address apart.
export function wide(node) {
  node.classList.add("wide");
  return node;
}

// The session

function forget() {
  session.me = null;
  session.csrf = null;
}

export function toLogin() {
  forget();
  location.replace("#/login");
  route();
}

async function signOutNow() {
  try { await post(SITE.logout); } catch { /* already gone */ }
  forget();
  app.replaceChildren();
  location.replace("#/login");
  route();
}

/** After a sign-in: the session's token now, the rest read on the way to the first page. */
export function signedIn(reply) {
  forget();
  session.csrf = reply.csrf_token;
}

// Leaving a page with unsaved changes

let unsaved = null; // the page's "are there changes not saved?", or null
let shownHash = null; // the hash of the page on screen

/** A page with edits not yet saved: leaving it (a link, Back, a reload, closing the tab) asks
 *  first while ``check()`` says so. Each page shown starts without. */
export function guardLeaving(check) { unsaved = check; }

/** Whether to go on to ``hash``: yes, unless the page shown has unsaved changes and the reader
 *  chooses to stay (the address is then put back). */
function mayLeave(hash) {
  if (!unsaved || hash === shownHash || !unsaved()) return true;
  if (window.confirm("This page has changes that are not saved yet. Leave it and lose them?")) return true;
  history.replaceState(null, "", shownHash);
  return false;
}

/** A draft's form edited in place (autosave.js): ``read()`` is its value as on screen, ``show(value)``
 *  puts a value back (undo), ``save(value)`` writes it. A change is saved a second after the
 *  typing stops, the state told in ``status``; Ctrl+Z (or the Undo button) goes back to the
 *  previous saved value; leaving with changes not saved asks first. */
export function autosaved(node, { read, show, save, status }) {
  const edits = new Autosave(read(), save, {
    onState: (state, error) => {
      status.dataset.state = state;
      status.replaceChildren(stateWords(state), error ? [" ", notice(error)] : "");
      undo.disabled = !edits.dirty && !edits.history.length;
    },
  });
  const undo = h("button.secondary.small", { type: "button", disabled: true }, "Undo");
  const back = async () => {
    const value = await edits.undo();
    if (value !== null) show(value);
  };
  undo.addEventListener("click", back);
  const changed = () => edits.edit(read());
  node.addEventListener("input", changed);
  node.addEventListener("change", changed);
  node.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && !event.shiftKey && event.key.toLowerCase() === "z") {
      event.preventDefault();
      back();
    }
  });
  status.setAttribute("role", "status");
  status.textContent = "No changes yet.";
  status.dataset.state = "saved";
  guardLeaving(() => edits.dirty);
  return { edits, undo, changed };
}

// Routing

let generation = 0;

export async function route() {
  const hash = location.hash || "#/";
  if (!mayLeave(hash)) return;
  unsaved = null;
  shownHash = hash;
  const mine = ++generation;
  const open = OPEN.find(([pattern]) => pattern.test(hash));
  if (open) { render(open[1](hash.match(open[0]))); return; }
  const current = document.getElementById("main");
  if (session.me && current) {
    // The frame stays; the page left is gone at once, so that nothing is typed into it.
    current.replaceChildren(h("p.muted", "Loading…"));
  } else {
    // Nothing private is on screen while the session is read (the back button after sign-out).
    app.replaceChildren(h("main", { id: "main", tabindex: "-1" }, h("p.muted", "Loading…")));
  }
  if (!session.me) {
    try {
      const me = await get(SITE.me);
      session.me = me;
      session.csrf = me.csrf_token;
    } catch (error) {
      if (mine !== generation) return;
      if (error instanceof ApiError && error.status === 401) { toLogin(); return; }
      render(h("main", { id: "main" }, notice(error)));
      return;
    }
  }
  // Two-factor sign-in required of this person and not set up: nothing else until it is.
  if (SITE.mustEnrol && SITE.mustEnrol(session.me) && hash !== SITE.enrolAt) {
    location.replace(SITE.enrolAt);
    return;
  }
  const page = PAGES.find(([pattern]) => pattern.test(hash));
  let nodes;
  try {
    nodes = page ? await page[1](hash.match(page[0])) : shell(hash, h("h1", "Not found"), h("p", "There is no such page."));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) { toLogin(); return; }
    nodes = shell(hash, h("h1", "Something went wrong"), notice(error));
  }
  if (mine === generation) render(nodes);
}

/** Show the page again (after an action), keeping the session. */
export function refresh() { route(); }

/** Starts a site with its page modules, in navigation order, and its session paths (``SITE``). */
export function start(modules, site = {}) {
  SITE = { ...SITE, ...site };
  apply(stored(globalThis.localStorage), document.documentElement);
  NAV = modules.filter((m) => m.nav).map((m) => m.nav);
  PAGES = modules.flatMap((m) => m.routes || []);
  OPEN = modules.flatMap((m) => m.openRoutes || []);
  window.addEventListener("hashchange", route);
  // A modal dialog open takes Escape itself (the browser closes it, focus back where it was).
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && closeDrawer && !document.querySelector("dialog[open]")) closeDrawer();
  });
  window.addEventListener("beforeunload", (event) => {
    if (unsaved && unsaved()) { event.preventDefault(); event.returnValue = ""; }
  });
  // "just now" does not stay true: the relative times shown are told again each half minute.
  setInterval(() => retell(app), 30_000);
  // Back from the browser's page cache: the session may have ended meanwhile.
  window.addEventListener("pageshow", (event) => { if (event.persisted) { forget(); route(); } });
  route();
}
