// What every console page shares: the session (GET /console/me, kept until sign-out or a 401),
// the frame (header, navigation), the hash router, forms and buttons. A page is a module of
// console/ exporting ``routes`` ([pattern, page]) and, to be in the navigation, ``nav``; app.js
// lists them. The dashboard's ui.js is the model; this one never touches the dashboard's session.

import { ApiError, get, post, session } from "/ui/console/api.js";
import { h } from "/ui/dom.js";
import { errorText } from "/ui/words.js";

const app = document.getElementById("app");
let NAV = [];
let PAGES = [];
let OPEN = [];

export function shell(current, ...content) {
  const me = session.me;
  const signOut = h("button.secondary", { type: "button", id: "sign-out" }, "Sign out");
  signOut.addEventListener("click", signOutNow);
  const nav = h("nav#nav", { id: "nav", "aria-label": "Sections" },
    h("ul", NAV.map(([href, label]) => h("li", h("a", { href, "aria-current": href === current ? "page" : null }, label)))));
  // On a phone the navigation folds behind a button, as the dashboard's does.
  const toggle = h("button.menu-toggle.secondary", { type: "button", "aria-expanded": "false", "aria-controls": "nav" }, "Menu");
  toggle.addEventListener("click", () => toggle.setAttribute("aria-expanded", String(nav.classList.toggle("open"))));
  return [
    h("header.top", h("strong.brand", "mailsvc operator"), toggle,
      h("span.who", me ? `${me.name} · ${me.email}` : ""), signOut),
    h("div.layout", nav, h("main", { id: "main", tabindex: "-1" }, content)),
  ];
}

function render(nodes) {
  app.replaceChildren(...[nodes].flat());
  const target = document.querySelector("main h1");
  if (target) { target.setAttribute("tabindex", "-1"); target.focus({ preventScroll: true }); }
}

export function notice(error) {
  const code = error instanceof ApiError ? error.code : null;
  return h("p.error", { role: "alert" }, errorText(error && error.message, code));
}

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
      if (error instanceof ApiError && error.status === 401 && session.me) { toLogin(); return; }
      status.replaceChildren(notice(error));
    } finally {
      if (button) button.disabled = false;
    }
  });
  return node;
}

/** A table that scrolls sideways in its box on a phone rather than break every word apart. */
export function wide(node) {
  node.classList.add("wide");
  return node;
}

export function input(name, attrs = {}) {
  return h("input", { name, type: "text", ...attrs });
}

export function action(label, fn, cls = "secondary small") {
  const button = h(`button.${cls.split(" ").join(".")}`, { type: "button" }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try { await fn(); } catch (error) { button.after(notice(error)); } finally { button.disabled = false; }
  });
  return button;
}

function forget() { session.me = null; session.csrf = null; }

export function toLogin() {
  forget();
  location.replace("#/login");
  route();
}

async function signOutNow() {
  try { await post("/console/auth/logout"); } catch { /* already gone */ }
  toLogin();
}

export function signedIn(reply) {
  forget();
  session.csrf = reply.csrf_token;
}

/** Show the page again (after an action), keeping the session. */
export function refresh() { route(); }

let generation = 0;

export async function route() {
  const hash = location.hash || "#/";
  const mine = ++generation;
  const open = OPEN.find(([pattern]) => pattern.test(hash));
  if (open) { render(open[1](hash.match(open[0]))); return; }
  if (!session.me) {
    app.replaceChildren(h("main", { id: "main", tabindex: "-1" }, h("p.muted", "Loading…")));
    try {
      const me = await get("/console/me");
      session.me = me;
      session.csrf = me.csrf_token;
    } catch (error) {
      if (mine !== generation) return;
      if (error instanceof ApiError && error.status === 401) { toLogin(); return; }
      render(h("main", { id: "main" }, notice(error)));
      return;
    }
  }
  const page = PAGES.find(([pattern]) => pattern.test(hash));
  let nodes;
  try {
    nodes = page ? await page[1](hash.match(page[0])) : shell(hash, h("h1", "Not found"));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) { toLogin(); return; }
    nodes = shell(hash, h("h1", "Something went wrong"), notice(error));
  }
  if (mine === generation) render(nodes);
}

export function start(modules) {
  NAV = modules.filter((m) => m.nav).map((m) => m.nav);
  PAGES = modules.flatMap((m) => m.routes || []);
  OPEN = modules.flatMap((m) => m.openRoutes || []);
  window.addEventListener("hashchange", route);
  window.addEventListener("pageshow", (event) => { if (event.persisted) { forget(); route(); } });
  route();
}
