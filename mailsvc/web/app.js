// The dashboard: a small client of /auth, /me and /dashboard/* with hash routes (#/emails).
// No framework, no build step, nothing from another origin (docs/decisions.md, "Dashboard").

import { ApiError, del, get, patch, post, session } from "/ui/api.js";
import { batches, contactsOf, rowMessage } from "/ui/csv.js";
import { contentPages } from "/ui/content.js";
import { badge, copyButton, field, h, svg, table, when } from "/ui/dom.js";
import { dmarcCard } from "/ui/deliverability.js";

const app = document.getElementById("app");

const NAV = [
  ["#/", "Overview"], ["#/emails", "E-mails"], ["#/domains", "Domains"], ["#/api-keys", "API keys"],
  ["#/webhooks", "Webhooks"], ["#/suppressions", "Suppressions"], ["#/contacts", "Contacts"],
  ["#/templates", "Templates"], ["#/builder", "Builder"], ["#/broadcasts", "Broadcasts"],
  ["#/settings", "Settings"],
];
const EVENTS = ["email.sent", "email.delivered", "email.delivery_delayed", "email.bounced", "email.complained",
  "email.failed", "email.suppressed", "domain.updated", "contact.created", "contact.updated", "contact.deleted"];

// Shell

function main(...children) {
  const node = h("main#main", { id: "main", tabindex: "-1" }, children);
  return node;
}

function shell(current, ...content) {
  const me = session.me;
  const toggle = h("button.menu-toggle.secondary", { type: "button", "aria-expanded": "false", "aria-controls": "nav" }, "Menu");
  const nav = h("nav#nav", { id: "nav", "aria-label": "Sections" },
    h("ul", NAV.map(([href, label]) => h("li", h("a", {
      href, "aria-current": href === current ? "page" : null,
    }, label)))));
  toggle.addEventListener("click", () => {
    const open = nav.classList.toggle("open");
    toggle.setAttribute("aria-expanded", String(open));
  });
  const signOut = h("button.secondary", { type: "button", id: "sign-out" }, "Sign out");
  signOut.addEventListener("click", signOutNow);
  return [
    h("a.skip", { href: "#main", onclick: (e) => { e.preventDefault(); document.getElementById("main").focus(); } },
      "Skip to content"),
    h("header.top", h("strong.brand", "mailsvc"), toggle,
      h("span.who", me ? `${me.email} · ${me.account.name}` : ""), signOut),
    h("div.layout", nav, main(content)),
  ];
}

function render(nodes) {
  app.replaceChildren(...[nodes].flat());
  const target = document.querySelector("main h1");
  if (target) { target.setAttribute("tabindex", "-1"); target.focus({ preventScroll: true }); }
}

function notice(error) {
  const text = error instanceof ApiError ? `${error.message} (${error.status} ${error.name})` : String(error.message || error);
  return h("p.error", { role: "alert" }, text);
}

function form(onsubmit, ...children) {
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

function input(name, attrs = {}) {
  return h("input", { name, type: "text", ...attrs });
}

function select(name, options, value) {
  return h("select", { name }, options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
}

function action(label, fn, cls = "secondary small") {
  const button = h(`button.${cls.split(" ").join(".")}`, { type: "button" }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try { await fn(); } catch (error) { button.after(notice(error)); } finally { button.disabled = false; }
  });
  return button;
}

// Sign-in

function toLogin() {
  session.me = null;
  session.csrf = null;
  location.replace("#/login");
  route();
}

async function signOutNow() {
  try { await post("/auth/logout"); } catch { /* already gone */ }
  session.me = null;
  session.csrf = null;
  app.replaceChildren();
  location.replace("#/login");
  route();
}

function loginPage() {
  return h("main.center", { id: "main", tabindex: "-1" },
    h("section.card.narrow",
      h("h1", "Sign in to mailsvc"),
      form(async (data) => {
        const me = await post("/auth/login", { email: data.get("email"), password: data.get("password") });
        session.csrf = me.csrf_token;
        location.hash = "#/";
      },
      field("E-mail address", input("email", { type: "email", autocomplete: "username", required: true })),
      field("Password", input("password", { type: "password", autocomplete: "current-password", required: true })),
      h("button.primary", { type: "submit" }, "Sign in"))));
}

function setPasswordPage(token) {
  return h("main.center", { id: "main", tabindex: "-1" },
    h("section.card.narrow",
      h("h1", "Choose your password"),
      form(async (data) => {
        if (data.get("password") !== data.get("again")) throw new Error("The two passwords differ.");
        const me = await post("/auth/password", { token, password: data.get("password") });
        session.csrf = me.csrf_token;
        location.replace("#/");
      },
      field("New password", input("password", { type: "password", autocomplete: "new-password", required: true, minlength: 10 }),
        "At least 10 characters."),
      field("Repeat it", input("again", { type: "password", autocomplete: "new-password", required: true })),
      h("button.primary", { type: "submit" }, "Set password and sign in"))));
}

// Overview

function chart(days) {
  const width = 720, height = 220, pad = 28;
  const max = Math.max(1, ...days.map((d) => Math.max(d.sent, d.delivered + d.bounced + d.complained)));
  const step = (width - pad) / days.length;
  const y = (v) => height - pad - (v / max) * (height - 2 * pad);
  const bars = days.flatMap((d, i) => {
    const x = pad + i * step;
    const title = `${d.day}: ${d.sent} sent, ${d.delivered} delivered, ${d.bounced} bounced, ${d.complained} complained`;
    return [
      svg("rect", { x: x + 1, y: y(d.sent), width: step / 2 - 1, height: height - pad - y(d.sent), class: "bar-sent" },
        svg("title", {}, title)),
      svg("rect", { x: x + step / 2, y: y(d.delivered), width: step / 2 - 1, height: height - pad - y(d.delivered), class: "bar-delivered" },
        svg("title", {}, title)),
      svg("rect", { x: x + step / 2, y: y(d.delivered + d.bounced + d.complained), width: step / 2 - 1,
        height: y(d.delivered) - y(d.delivered + d.bounced + d.complained), class: "bar-failed" }, svg("title", {}, title)),
    ];
  });
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart",
    "aria-label": "Sends and outcomes per day over 30 days" },
  svg("line", { x1: pad, y1: height - pad, x2: width, y2: height - pad, class: "axis" }),
  svg("text", { x: 0, y: pad, class: "tick" }, String(max)),
  svg("text", { x: pad, y: height - 8, class: "tick" }, days[0].day),
  svg("text", { x: width - 80, y: height - 8, class: "tick" }, days[days.length - 1].day),
  bars);
}

function meter(label, used, limit) {
  return h("div.meter",
    h("div.meter-label", h("span", label), h("span", `${used.toLocaleString()} / ${limit.toLocaleString()}`)),
    h("progress", { max: limit, value: Math.min(used, limit), "aria-label": `${label}: ${used} of ${limit}` }));
}

async function overviewPage() {
  const stats = await get("/dashboard/stats");
  const totals = stats.days.reduce((t, d) => ({ sent: t.sent + d.sent, delivered: t.delivered + d.delivered,
    bounced: t.bounced + d.bounced, complained: t.complained + d.complained }), { sent: 0, delivered: 0, bounced: 0, complained: 0 });
  return shell("#/",
    h("h1", "Overview"),
    h("section.cards",
      ...Object.entries(totals).map(([k, v]) => h("div.card.stat", h("span.stat-value", String(v)), h("span.muted", `${k} (30 days)`)))),
    h("section.card", h("h2", "Sends and outcomes per day"), chart(stats.days),
      h("p.legend", h("span.key.k-sent", "sent"), h("span.key.k-delivered", "delivered"), h("span.key.k-failed", "bounced or complained"))),
    h("section.card", h("h2", "Quota"),
      meter("Today", stats.usage.day, stats.usage.daily_quota),
      meter("This month", stats.usage.month, stats.usage.monthly_quota)));
}

// E-mails

function emailRows(items) {
  return items.map((e) => h("tr",
    h("td", h("a", { href: `#/emails/${e.id}` }, e.subject || "(no subject)")),
    h("td", [].concat(e.to || []).join(", ")),
    h("td", badge(e.last_event)),
    h("td", when(e.created_at))));
}

async function emailsPage(query) {
  const list = query
    ? await get(`/dashboard/search/emails?q=${encodeURIComponent(query)}`)
    : await get("/dashboard/emails?limit=50");
  const search = form(async (data) => {
    const q = String(data.get("q") || "").trim();
    location.hash = q ? `#/emails?q=${encodeURIComponent(q)}` : "#/emails";
  }, h("div.inline", field("Search subject, sender or recipient", input("q", { type: "search", value: query || "" })),
    h("button.primary", { type: "submit" }, "Search")));
  return shell("#/emails", h("h1", "E-mails"), search,
    table(["Subject", "To", "Status", "Sent"], emailRows(list.data)));
}

async function emailPage(id) {
  const [email, events, attachments] = await Promise.all([
    get(`/dashboard/emails/${encodeURIComponent(id)}`),
    get(`/dashboard/emails/${encodeURIComponent(id)}/events`),
    get(`/dashboard/emails/${encodeURIComponent(id)}/attachments`).catch(() => ({ data: [] })),
  ]);
  const headers = [["From", email.from], ["To", [].concat(email.to || []).join(", ")], ["Cc", [].concat(email.cc || []).join(", ")],
    ["Reply-To", [].concat(email.reply_to || []).join(", ")], ["Subject", email.subject], ["Created", when(email.created_at)],
    ["Status", email.last_event]];
  return shell("#/emails",
    h("p", h("a", { href: "#/emails" }, "← All e-mails")),
    h("h1", email.subject || "(no subject)"),
    h("section.card", h("h2", "Headers"), h("dl.pairs", headers.filter(([, v]) => v).flatMap(([k, v]) => [h("dt", k), h("dd", v)]))),
    h("section.card", h("h2", "HTML"),
      email.html
        ? h("iframe.preview", { title: "HTML preview of the e-mail", sandbox: "", referrerpolicy: "no-referrer",
          src: `/dashboard/emails/${encodeURIComponent(id)}/html` })
        : h("p.muted", "No HTML part.")),
    h("section.card", h("h2", "Text"), email.text ? h("pre.text", email.text) : h("p.muted", "No text part.")),
    h("section.card", h("h2", "Attachments"),
      table(["File", "Type", "Size"], attachments.data.map((a) => h("tr",
        h("td", a.download_url ? h("a", { href: a.download_url, rel: "noreferrer" }, a.filename || a.id) : (a.filename || a.id)),
        h("td", a.content_type), h("td", `${a.size} B`))))),
    h("section.card", h("h2", "Events"),
      h("ol.timeline", events.data.length ? events.data.map((e) => h("li",
        badge(e.type.replace("email.", "")), " ", h("time", when(e.created_at)),
        e.data && e.data.to ? h("span.muted", ` ${[].concat(e.data.to).join(", ")}`) : null,
        e.data && e.data.bounce ? h("span.muted", ` ${e.data.bounce.message || ""}`) : null)) : h("li.muted", "No events yet.")),
      table(["Recipient", "Delivery", "Attempts", "Last answer"], events.deliveries.map((d) => h("tr",
        h("td", d.recipient), h("td", badge(d.status)), h("td", String(d.attempts)), h("td", d.last_response || "—"))))));
}

// Domains

async function domainsPage() {
  const list = await get("/dashboard/domains");
  return shell("#/domains", h("h1", "Domains"),
    h("section.card", h("h2", "Add a domain"), form(async (data) => {
      const made = await post("/dashboard/domains", { name: data.get("name") });
      location.hash = `#/domains/${made.id}`;
    }, h("div.inline", field("Domain name", input("name", { required: true, placeholder: "example.com" })),
      h("button.primary", { type: "submit" }, "Add domain")))),
    table(["Domain", "Status", "Region", "Created"], list.data.map((d) => h("tr",
      h("td", h("a", { href: `#/domains/${d.id}` }, d.name)), h("td", badge(d.status)), h("td", d.region), h("td", when(d.created_at))))));
}

async function domainPage(id) {
  const path = `/dashboard/domains/${encodeURIComponent(id)}`;
  const domain = await get(path);
  // What DNS answers now is looked up live: the page shows first, the answers fill in.
  const cells = domain.records.map(() => h("td", { "aria-live": "polite" }, "checking…"));
  get(`${path}/dns`).then((live) => {
    domain.records.forEach((r, i) => {
      const found = live.data.find((x) => x.name === r.name && x.type === r.type && x.value === r.value);
      cells[i].replaceChildren(found ? badge(found.live) : "—");
    });
  }).catch(() => cells.forEach((c) => c.replaceChildren("unavailable")));
  return shell("#/domains",
    h("p", h("a", { href: "#/domains" }, "← All domains")),
    h("h1", domain.name, " ", badge(domain.status)),
    h("section.card", h("h2", "DNS records"),
      h("p.muted", `Publish these records in the zone of ${domain.name}, then verify.`),
      table(["Type", "Name", "Value", "Status", "DNS now"], domain.records.map((r, i) => h("tr",
        h("td", r.type, r.priority !== undefined ? ` ${r.priority}` : ""),
        h("td", h("code", r.name), " ", copyButton(r.name, "Copy name")),
        h("td.value", h("code", r.value), " ", copyButton(r.value, "Copy value")),
        h("td", badge(r.status)), cells[i])))),
    dmarcCard(path),
    h("section.card", h("h2", "Verify"), action("Verify now", async () => {
      await post(`${path}/verify`);
      route();
    }, "primary")),
    h("section.card", h("h2", "TLS policy"), form(async (data) => {
      await patch(path, { tls: data.get("tls") });
      return h("p.ok", "Saved.");
    }, field("When delivering", select("tls", [["opportunistic", "Opportunistic: TLS when offered"],
      ["enforced", "Enforced: never in plain text"]], domain.tls)), h("button.primary", { type: "submit" }, "Save"))),
    h("section.card", h("h2", "Set up with Cloudflare"), form(async (data) => {
      const done = await post(`${path}/dns-provider/cloudflare`, { api_token: data.get("api_token") });
      return h("p.ok", `Records written${done && done.zone ? ` to ${done.zone}` : ""}.`);
    }, field("Cloudflare API token", input("api_token", { type: "password", required: true, autocomplete: "off" }),
      "A token with DNS Edit and Zone Read on this zone; it is used once and not kept."),
    h("button.primary", { type: "submit" }, "Write the records"))),
    h("section.card", h("h2", "Delete"), action(`Delete ${domain.name}`, async () => {
      await del(path);
      location.hash = "#/domains";
    }, "danger small")));
}

// API keys

function madeBy(by) {
  if (!by) return "—";
  if (by.type === "user") return by.user_id ? by.email : `${by.email} (removed)`;
  return by.type === "operator" ? "Operator" : "API";
}

async function apiKeysPage() {
  const list = await get("/dashboard/api-keys");
  return shell("#/api-keys", h("h1", "API keys"),
    h("section.card", h("h2", "Create a key"), form(async (data, node) => {
      const made = await post("/dashboard/api-keys", { name: data.get("name"), permission: data.get("permission") });
      node.reset();
      return h("div.token", { id: "new-token" },
        h("p", "Your new key. It is shown only this once: copy it now."),
        h("code", made.token), " ", copyButton(made.token, "Copy key"),
        h("p", h("a", { href: "#/api-keys", onclick: () => setTimeout(route) }, "Done")));
    }, h("div.inline", field("Name", input("name", { required: true, maxlength: 50 })),
      field("Permission", select("permission", [["full_access", "Full access"], ["sending_access", "Sending only"]], "full_access")),
      h("button.primary", { type: "submit" }, "Create")))),
    table(["Name", "Made by", "Created", "Last used", ""], list.data.map((k) => {
      const name = input("name", { value: k.name, "aria-label": `New name for ${k.name}` });
      return h("tr",
        h("td", name), h("td", madeBy(k.created_by)), h("td", when(k.created_at)), h("td", when(k.last_used_at)),
        h("td.actions", action("Rename", async () => { await patch(`/dashboard/api-keys/${k.id}`, { name: name.value }); route(); }),
          action("Revoke", async () => { await del(`/dashboard/api-keys/${k.id}`); route(); }, "danger small")));
    })));
}

// Webhooks

function eventBoxes(chosen = []) {
  return h("fieldset.events", h("legend", "Events"), EVENTS.map((e) => {
    const box = h("input", { type: "checkbox", name: "events", value: e, checked: chosen.includes(e) });
    return h("label.check", box, e);
  }));
}

async function webhooksPage() {
  const list = await get("/dashboard/webhooks");
  return shell("#/webhooks", h("h1", "Webhooks"),
    h("section.card", h("h2", "Add an endpoint"), form(async (data) => {
      const made = await post("/dashboard/webhooks", { endpoint: data.get("endpoint"), events: data.getAll("events") });
      location.hash = `#/webhooks/${made.id}`;
    }, field("Endpoint URL", input("endpoint", { type: "url", required: true, placeholder: "https://example.com/hooks" })),
    eventBoxes(["email.sent", "email.delivered", "email.bounced"]), h("button.primary", { type: "submit" }, "Create webhook"))),
    table(["Endpoint", "Events", "Status", "Created"], list.data.map((w) => h("tr",
      h("td", h("a", { href: `#/webhooks/${w.id}` }, w.endpoint)), h("td", w.events.join(", ")), h("td", badge(w.status)),
      h("td", when(w.created_at))))));
}

async function webhookPage(id) {
  const path = `/dashboard/webhooks/${encodeURIComponent(id)}`;
  const [hook, deliveries] = await Promise.all([get(path), get(`${path}/deliveries`)]);
  const secret = hook.signing_secret;
  return shell("#/webhooks",
    h("p", h("a", { href: "#/webhooks" }, "← All webhooks")),
    h("h1", "Webhook"),
    h("section.card", h("dl.pairs", h("dt", "Endpoint"), h("dd", h("code", hook.endpoint)), h("dt", "Status"), h("dd", badge(hook.status)),
      secret ? [h("dt", "Signing secret"), h("dd", h("code.secret", secret), " ", copyButton(secret, "Copy secret"))] : null),
    h("div.row",
      action(hook.status === "enabled" ? "Disable" : "Enable", async () => {
        await patch(path, { status: hook.status === "enabled" ? "disabled" : "enabled" });
        route();
      }),
      action("Rotate secret", async () => { await post(`${path}/signing-secret/rotate`); route(); }),
      action("Delete", async () => { await del(path); location.hash = "#/webhooks"; }, "danger small"))),
    h("section.card", h("h2", "Events"), form(async (data) => {
      await patch(path, { events: data.getAll("events") });
      return h("p.ok", "Saved.");
    }, eventBoxes(hook.events), h("button.primary", { type: "submit" }, "Save events"))),
    h("section.card", h("h2", "Recent deliveries"),
      table(["Event", "State", "Response", "Attempts", "Last attempt"], deliveries.data.map((d) => h("tr",
        h("td", d.event), h("td", badge(d.state)), h("td", d.response_status ? String(d.response_status) : "—"),
        h("td", String(d.attempts)), h("td", when(d.last_attempt_at)))))));
}

// Suppressions

async function suppressionsPage(origin) {
  const list = await get(`/dashboard/suppressions${origin ? `?origin=${encodeURIComponent(origin)}` : ""}`);
  const filter = select("origin", [["", "All origins"], ["hard_bounce", "Hard bounce"], ["complaint", "Complaint"],
    ["unsubscribe", "Unsubscribe"], ["manual", "Manual"]], origin || "");
  filter.addEventListener("change", () => { location.hash = filter.value ? `#/suppressions?origin=${filter.value}` : "#/suppressions"; });
  return shell("#/suppressions", h("h1", "Suppressions"),
    h("section.card", h("h2", "Add an address"), form(async (data) => {
      await post("/dashboard/suppressions", { email: data.get("email") });
      route();
    }, h("div.inline", field("E-mail address", input("email", { type: "email", required: true })),
      h("button.primary", { type: "submit" }, "Suppress")))),
    field("Origin", filter),
    table(["Address", "Origin", "Since", ""], list.data.map((s) => h("tr",
      h("td", s.email), h("td", badge(s.origin || "")), h("td", when(s.created_at)),
      h("td", action("Remove", async () => { await del(`/dashboard/suppressions/${encodeURIComponent(s.id || s.email)}`); route(); }))))));
}

// Contacts and segments

const CONTACTS_PAGE = 50;

function contactsHash(params) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
  return query ? `#/contacts?${query}` : "#/contacts";
}

function fullName(c) {
  return [c.first_name, c.last_name].filter(Boolean).join(" ") || "—";
}

function segmentOptions(segments, none) {
  return [["", none], ...segments.map((s) => [s.id, s.name])];
}

async function contactsPage(query) {
  const params = new URLSearchParams(query || "");
  const q = params.get("q") || "", segment = params.get("segment") || "";
  const after = params.get("after"), before = params.get("before");
  const args = new URLSearchParams({ limit: String(CONTACTS_PAGE) });
  if (q) args.set("q", q);
  if (segment) args.set("segment_id", segment);
  if (after) args.set("after", after); else if (before) args.set("before", before);
  const [list, segments] = await Promise.all([get(`/dashboard/contacts?${args}`), get("/dashboard/segments")]);
  const segmentsList = segments.data;
  const caption = q || segment ? (n, more) => `Contacts matching the search (${n}${more ? "+" : ""})` : () => null;
  const listed = h("div", contactsTable(list.data, caption(list.data.length, list.has_more)));
  // After an import the first page is read again, so that the new contacts show at once.
  const refresh = async () => {
    const first = new URLSearchParams(args);
    first.delete("after"); first.delete("before");
    const again = await get(`/dashboard/contacts?${first}`);
    listed.replaceChildren(contactsTable(again.data, caption(again.data.length, again.has_more)));
  };
  const filter = select("segment", segmentOptions(segmentsList, "All contacts"), segment);
  const search = form(async (data) => {
    location.hash = contactsHash({ q: String(data.get("q") || "").trim(), segment: data.get("segment") });
  }, h("div.inline", field("Search address, first or last name", input("q", { type: "search", value: q, maxlength: 320 }),
    "The beginning of an address or a name."),
  field("Segment", filter), h("button.primary", { type: "submit" }, "Search")));
  const items = list.data;
  // Newest first: "Older" follows the last id, "Newer" precedes the first one.
  const older = items.length > 0 && (before || list.has_more)
    ? h("a.button", { href: contactsHash({ q, segment, after: items[items.length - 1].id }) }, "Older →") : null;
  const newer = items.length > 0 && (after || (before && list.has_more))
    ? h("a.button", { href: contactsHash({ q, segment, before: items[0].id }) }, "← Newer") : null;
  return shell("#/contacts", h("h1", "Contacts and segments"),
    h("section#contact-list.card", h("h2", "Contacts"), search, listed,
      newer || older ? h("div.pager", { role: "navigation", "aria-label": "Pages of contacts" }, newer, older) : null),
    h("section.card", h("h2", "Add a contact"), form(async (data) => {
      const body = { email: data.get("email"), unsubscribed: data.get("unsubscribed") === "on" };
      for (const name of ["first_name", "last_name"]) if (data.get(name)) body[name] = data.get(name);
      const made = await post("/dashboard/contacts", body);
      location.hash = `#/contacts/${made.id}`;
    }, h("div.inline",
      field("E-mail address", input("email", { type: "email", required: true })),
      field("First name", input("first_name", { maxlength: 200 })),
      field("Last name", input("last_name", { maxlength: 200 }))),
    h("p", h("label.check", h("input", { type: "checkbox", name: "unsubscribed" }), "Unsubscribed")),
    h("button.primary", { type: "submit" }, "Add contact"))),
    importCard(segmentsList, refresh),
    segmentsCard(segmentsList));
}

// On a phone these tables scroll sideways in their box rather than break every address apart.
function wide(node) {
  node.classList.add("wide");
  return node;
}

function contactsTable(items, caption) {
  return wide(table(["Address", "Name", "Status", "Created"], items.map((c) => h("tr",
    h("td", h("a", { href: `#/contacts/${c.id}` }, c.email)), h("td", fullName(c)),
    h("td", badge(c.unsubscribed ? "unsubscribed" : "subscribed")), h("td.nowrap", when(c.created_at)))), caption));
}

function segmentsCard(segments) {
  return h("section.card", h("h2", "Segments"),
    form(async (data) => {
      await post("/dashboard/segments", { name: data.get("name") });
      route();
    }, h("div.inline", field("New segment name", input("name", { required: true, maxlength: 256 })),
      h("button.primary", { type: "submit" }, "Create segment"))),
    wide(table(["Name", "Created", ""], segments.map((s) => {
      const name = input("name", { value: s.name, maxlength: 256, "aria-label": `New name for segment ${s.name}` });
      return h("tr", h("td", name), h("td.nowrap", when(s.created_at)),
        h("td.actions.nowrap",
          h("a", { href: contactsHash({ segment: s.id }), "aria-label": `Members of ${s.name}` }, "Members"),
          action("Rename", async () => { await patch(`/dashboard/segments/${s.id}`, { name: name.value }); route(); }),
          action("Delete", async () => {
            await del(`/dashboard/segments/${s.id}`);
            // A list filtered on the segment just deleted has nothing left to show.
            if (location.hash.includes(s.id)) location.hash = "#/contacts"; else route();
          }, "danger small")));
    }), "Segments (deleting one keeps its contacts)")));
}

function importCard(segments, refresh) {
  const file = h("input", { type: "file", name: "file", accept: ".csv,text/csv", required: true });
  const progress = h("progress", { max: 1, value: 0, hidden: true, "aria-label": "Import progress" });
  const counter = h("p.muted", { role: "status", "aria-live": "polite" });
  const problems = h("div#import-errors", { id: "import-errors" });
  return h("section.card", h("h2", "Import a CSV file"),
    h("p.muted", "A header row, then one contact a line. Columns: email (required), first_name, last_name, unsubscribed "
      + "(true or false), and any other column as a property: name it key:number or key:boolean for those types, "
      + "else it is text. Empty cells set nothing. Up to 1,000 rows go in each call."),
    form(async (data) => {
      problems.replaceChildren();
      const chosen = file.files[0];
      if (!chosen) throw new Error("Choose a file.");
      const parsed = contactsOf(await chosen.text());
      const total = parsed.rows.length + parsed.errors.length;
      const failed = [...parsed.errors];
      let saved = 0, done = parsed.errors.length;
      progress.hidden = false;
      progress.max = Math.max(total, 1);
      const show = () => {
        progress.value = done;
        counter.textContent = `${done.toLocaleString()} of ${total.toLocaleString()} rows: ${saved.toLocaleString()} saved, `
          + `${failed.length.toLocaleString()} refused.`;
      };
      show();
      const segment = data.get("segment");
      let stopped = null;
      for (const chunk of batches(parsed.rows)) {
        let reply;
        try {
          reply = await post("/dashboard/contacts/batch", { contacts: chunk.map((r) => r.contact), ...(segment ? { segment_id: segment } : {}) });
        } catch (error) {
          if (error instanceof ApiError && error.status === 401) return toLogin();
          stopped = { line: chunk[0].line, error };
          break;
        }
        saved += reply.data.length;
        for (const e of reply.errors) {
          const row = chunk[e.index];
          failed.push({ line: row ? row.line : null, email: row ? row.email : "", message: rowMessage(e.message) });
        }
        done += chunk.length;
        show();
      }
      failed.sort((a, b) => a.line - b.line);
      problems.replaceChildren(importErrors(failed));
      if (saved) await refresh().catch(() => {});
      if (stopped) {
        return h("p.error", { role: "alert" },
          `The import stopped at line ${stopped.line}: ${stopped.error.message}. The lines before it were sent.`);
      }
      return h("p.ok", `Import finished: ${saved.toLocaleString()} rows saved, ${failed.length.toLocaleString()} refused.`);
    }, h("div.inline", field("CSV file", file),
      field("Add them to a segment", select("segment", segmentOptions(segments, "No segment"), "")),
      h("button.primary", { type: "submit" }, "Import"))),
    progress, counter, problems);
}

function importErrors(failed) {
  if (!failed.length) return null;
  const shown = failed.slice(0, 500);
  return h("div",
    wide(table(["Line", "Address", "Error"], shown.map((e) => h("tr",
      h("td.nowrap", e.line === null ? "?" : String(e.line)), h("td", e.email || "—"), h("td", e.message))),
    `Rows refused (${failed.length.toLocaleString()})`)),
    failed.length > shown.length ? h("p.muted", `And ${(failed.length - shown.length).toLocaleString()} more.`) : null);
}

function propertyInput(key, prop) {
  const label = `Value of ${key}`;
  if (prop.type === "boolean") {
    const node = select(`prop:${key}`, [["true", "true"], ["false", "false"]], String(prop.value));
    node.setAttribute("aria-label", label);
    return node;
  }
  return input(`prop:${key}`, { type: prop.type === "number" ? "number" : "text", step: prop.type === "number" ? "any" : null,
    value: String(prop.value), "aria-label": label });
}

function typedValue(type, raw) {
  if (type === "number") {
    const value = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(value)) throw new Error(`"${raw}" is not a number.`);
    return value;
  }
  if (type === "boolean") return raw === "true";
  return raw;
}

async function contactPage(id) {
  const path = `/dashboard/contacts/${encodeURIComponent(id)}`;
  const [contact, member, segments] = await Promise.all([get(path), get(`${path}/segments`), get("/dashboard/segments")]);
  const props = Object.entries(contact.properties || {});
  const memberIds = new Set(member.data.map((s) => s.id));
  const others = segments.data.filter((s) => !memberIds.has(s.id));
  const joinSelect = select("segment", others.map((s) => [s.id, s.name]), "");
  return shell("#/contacts",
    h("p", h("a", { href: "#/contacts" }, "← All contacts")),
    h("h1", contact.email),
    h("section.card", h("h2", "Details"), form(async (data) => {
      const body = {
        first_name: String(data.get("first_name")).trim() || null,
        last_name: String(data.get("last_name")).trim() || null,
      };
      // Only a change is sent: saving a name never touches the suppression list.
      if ((data.get("unsubscribed") === "on") !== contact.unsubscribed) body.unsubscribed = !contact.unsubscribed;
      const properties = {};
      for (const [key, prop] of props) {
        if (data.get(`drop:${key}`) === "on") properties[key] = null;
        else properties[key] = typedValue(prop.type, String(data.get(`prop:${key}`)));
      }
      const newKey = String(data.get("new_key") || "").trim();
      if (newKey) properties[newKey] = typedValue(data.get("new_type"), String(data.get("new_value") || ""));
      if (Object.keys(properties).length) body.properties = properties;
      await patch(path, body);
      route();
    },
    h("div.inline",
      field("First name", input("first_name", { value: contact.first_name || "", maxlength: 200 })),
      field("Last name", input("last_name", { value: contact.last_name || "", maxlength: 200 }))),
    h("p", h("label.check", h("input", { type: "checkbox", name: "unsubscribed", checked: contact.unsubscribed }),
      "Unsubscribed (on the suppression list)")),
    table(["Property", "Type", "Value", "Remove"], props.map(([key, prop]) => h("tr",
      h("td", h("code", key)), h("td", prop.type), h("td", propertyInput(key, prop)),
      h("td", h("input", { type: "checkbox", name: `drop:${key}`, "aria-label": `Remove ${key}` })))), "Properties"),
    h("fieldset.events", h("legend", "Add a property"),
      field("Name", input("new_key", { pattern: "[A-Za-z_][A-Za-z0-9_]{0,49}", maxlength: 50 })),
      field("Type", select("new_type", [["string", "Text"], ["number", "Number"], ["boolean", "Boolean (true/false)"]], "string")),
      field("Value", input("new_value"))),
    h("p.muted", "A property keeps the type of the first value the account gave it."),
    h("button.primary", { type: "submit" }, "Save"))),
    h("section.card", h("h2", "Segments"),
      table(["Segment", ""], member.data.map((s) => h("tr",
        h("td", h("a", { href: contactsHash({ segment: s.id }) }, s.name)),
        h("td", action(`Remove from ${s.name}`, async () => { await del(`${path}/segments/${s.id}`); route(); }))))),
      others.length ? h("div.inline.spaced", field("Add to segment", joinSelect),
        action("Add", async () => { await post(`${path}/segments/${joinSelect.value}`); route(); }, "primary"))
        : h("p.muted", segments.data.length ? "In every segment." : "No segments yet: create one on the contacts page.")),
    h("section.card", h("h2", "Delete"), h("p.muted", "Its suppression record, if any, stays."),
      action(`Delete ${contact.email}`, async () => { await del(path); location.hash = "#/contacts"; }, "danger small")));
}

// Settings

// Removing a user who made API keys: their keys go on working after them (a full-access one
// too) unless revoked, so a dialog lists them and asks. Answers "revoke", "keep" or "" (cancel).
function askAboutKeys(user, keys) {
  return new Promise((resolve) => {
    const choice = (value, label, cls) => h(`button.${cls}`, { type: "button", value }, label);
    const dialog = h("dialog.confirm", { "aria-labelledby": "remove-user-title" },
      h("h2", { id: "remove-user-title" }, `Remove ${user.email}?`),
      h("p", `${user.email} made ${keys.length === 1 ? "this API key" : `these ${keys.length} API keys`}.`
        + " Keys keep working after their maker is removed, unless you revoke them:"),
      h("ul", keys.map((k) => h("li", h("strong", k.name), ` — created ${when(k.created_at)}, last used ${when(k.last_used_at)}`))),
      h("div.inline", choice("revoke", "Remove and revoke the keys", "danger"),
        choice("keep", "Remove, keep the keys", "secondary"), choice("", "Cancel", "secondary")));
    dialog.addEventListener("click", (event) => {
      const button = event.target.closest("button");
      if (button) dialog.close(button.value);
    });
    dialog.addEventListener("close", () => { dialog.remove(); resolve(dialog.returnValue); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

async function removeUser(user) {
  const keys = (await get("/dashboard/api-keys")).data.filter((k) => k.created_by && k.created_by.user_id === user.id);
  const choice = keys.length ? await askAboutKeys(user, keys) : "keep";
  if (!choice) return;
  await del(`/dashboard/users/${user.id}${choice === "revoke" ? "?revoke_keys=true" : ""}`);
  route();
}

async function settingsPage() {
  const me = session.me;
  const users = await get("/dashboard/users");
  const owner = me.role === "owner";
  const a = me.account;
  return shell("#/settings", h("h1", "Settings"),
    h("section.card", h("h2", "Account"), h("dl.pairs",
      [["Name", a.name], ["Plan", a.plan], ["Status", a.status], ["Daily quota", a.daily_quota], ["Monthly quota", a.monthly_quota],
        ["Domains", a.max_domains === null ? "unlimited" : a.max_domains], ["Send rate", `${a.send_rate_per_sec}/s`],
        ["API rate", `${a.api_rate_per_sec}/s`]].flatMap(([k, v]) => [h("dt", k), h("dd", String(v))]))),
    h("section.card", h("h2", "Users"),
      table(["Address", "Role", "Status", ""], users.data.map((u) => h("tr",
        h("td", u.email), h("td", u.role), h("td", badge(u.status)),
        h("td.actions", owner && u.id !== me.id ? [
          action("New password link", async (ev) => {
            const made = await post(`/dashboard/users/${u.id}/password-link`);
            document.getElementById("invite-status").replaceChildren(linkShown(made));
          }),
          action("Remove", () => removeUser(u), "danger small")] : null)))),
      h("div#invite-status", { id: "invite-status", role: "status" }),
      owner ? form(async (data, node) => {
        const made = await post("/dashboard/users", { email: data.get("email"), role: data.get("role") });
        node.reset();
        return linkShown(made);
      }, h("h3", "Invite a user"), h("div.inline", field("E-mail address", input("email", { type: "email", required: true })),
        field("Role", select("role", [["member", "Member"], ["owner", "Owner"]], "member")),
        h("button.primary", { type: "submit" }, "Invite"))) : h("p.muted", "Only owners invite users.")),
    h("section.card", h("h2", "Change your password"), form(async (data, node) => {
      const me2 = await post("/dashboard/password", { current_password: data.get("current"), password: data.get("password") });
      session.csrf = me2.csrf_token;
      node.reset();
      return h("p.ok", "Password changed; your other sessions were signed out.");
    }, field("Current password", input("current", { type: "password", autocomplete: "current-password", required: true })),
    field("New password", input("password", { type: "password", autocomplete: "new-password", required: true, minlength: 10 })),
    h("button.primary", { type: "submit" }, "Change password"))));
}

function linkShown(made) {
  return h("div.token", h("p", `Send this link to ${made.email}; it works once:`),
    h("code", made.set_password_url), " ", copyButton(made.set_password_url, "Copy link"));
}

// Routing

const PAGES = [
  [/^#\/?$/, () => overviewPage()],
  [/^#\/emails\/([\w-]+)$/, (m) => emailPage(m[1])],
  [/^#\/emails(?:\?q=(.*))?$/, (m) => emailsPage(m[1] ? decodeURIComponent(m[1]) : "")],
  [/^#\/domains\/([\w-]+)$/, (m) => domainPage(m[1])],
  [/^#\/domains$/, () => domainsPage()],
  [/^#\/api-keys$/, () => apiKeysPage()],
  [/^#\/webhooks\/([\w-]+)$/, (m) => webhookPage(m[1])],
  [/^#\/webhooks$/, () => webhooksPage()],
  [/^#\/suppressions(?:\?origin=(\w+))?$/, (m) => suppressionsPage(m[1])],
  [/^#\/contacts\/([\w-]+)$/, (m) => contactPage(m[1])],
  [/^#\/contacts(?:\?(.*))?$/, (m) => contactsPage(m[1] || "")],
  ...contentPages({ shell, form, action, notice, input, select, wide, route: () => route() }),
  [/^#\/settings$/, () => settingsPage()],
];

let generation = 0;

async function route() {
  const hash = location.hash || "#/";
  const mine = ++generation;
  const setPassword = hash.match(/^#\/set-password\/([\w-]+)$/);
  if (setPassword) { render(setPasswordPage(setPassword[1])); return; }
  if (hash === "#/login") { render(loginPage()); return; }
  // Nothing private is on screen while the session is checked (the back button after sign-out).
  app.replaceChildren(h("main", { id: "main", tabindex: "-1" }, h("p.muted", "Loading…")));
  try {
    const me = await get("/me");
    session.me = me;
    session.csrf = me.csrf_token;
  } catch (error) {
    if (mine !== generation) return;
    if (error instanceof ApiError && error.status === 401) { toLogin(); return; }
    render(h("main", { id: "main" }, notice(error)));
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

window.addEventListener("hashchange", route);
window.addEventListener("pageshow", (event) => { if (event.persisted) route(); });
route();
