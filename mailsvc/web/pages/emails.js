// E-mails: the list (by status, a search, a page at a time; the filter in the hash); one e-mail
// is pages/email.js.

import { get } from "/ui/api.js";
import { STATUSES, apiPath, moved, narrowed, pages, parse, toHash } from "/ui/emailfilter.js";
import { ago, badge, clip, copyButton, field, h, table } from "/ui/dom.js";
import { form, input, shell, wide } from "/ui/ui.js";

function emailRows(items) {
  return items.map((e) => h("tr",
    h("td", h("a.clip", { href: `#/emails/${e.id}`, title: e.subject || "(no subject)" }, e.subject || "(no subject)")),
    h("td", clip([].concat(e.to || []).join(", "))),
    h("td", badge(e.last_event)),
    h("td.nowrap", ago(e.created_at))));
}

/** What an account with no e-mail does next: a first send through the Python SDK, from the test
 *  sender to a test address (no domain needed), against this node. ``then`` says where it shows
 *  (the Inbox shares the card). */
export function firstEmail(then = "Then it is listed here with its events.") {
  const snippet = [
    "import resend",
    "",
    `resend.api_url = "${location.origin}"  # this node`,
    'resend.api_key = "re_..."  # a key from API keys',
    "email = resend.Emails.send({",
    '    "from": "onboarding@resend.dev",',
    '    "to": "delivered@resend.dev",',
    '    "subject": "Hello from mailsvc",',
    '    "html": "<p>It works.</p>",',
    "})",
    'print(email["id"])',
  ].join("\n");
  return h("section.card.empty-state", { id: "first-email" },
    h("h2", "Send your first e-mail"),
    h("p", "No e-mail yet. Send one from the test sender ", h("code", "onboarding@resend.dev"), " to the test address ",
      h("code", "delivered@resend.dev"), ": no domain is needed. With the Python SDK (", h("code", "pip install resend"),
      ") and a key from ", h("a", { href: "#/api-keys" }, "API keys"), ":"),
    h("pre.snippet", { tabindex: "0" }, h("code", snippet)), copyButton(snippet, "Copy the code"),
    h("p.muted", `${then} To send from your own addresses, `, h("a", { href: "#/domains" }, "add a domain"), "."));
}

const EMAILS_PAGE = 50;

/** The status chips: links to the list filtered so, the current one marked. */
function chips(filter) {
  return h("div.chips", { role: "group", "aria-label": "Filter by status" }, STATUSES.map(([code, label]) => h("a.chip-link", {
    href: toHash(moved(filter, { status: code })), "aria-current": code === filter.status ? "true" : null,
  }, label)));
}

/** The search and its narrowing: a text, a range of days and a sending domain. */
function searchForm(filter) {
  return form(async (data) => {
    const text = (name) => String(data.get(name) || "").trim();
    location.hash = toHash(moved(filter, { q: text("q"), from: text("from"), to: text("to"), domain: text("domain").toLowerCase() }));
  }, h("div.inline.filters",
    field("Search subject, sender or recipient", input("q", { type: "search", value: filter.q }), "Or paste an e-mail's id."),
    field("From day", input("from", { type: "date", value: filter.from })),
    field("To day", input("to", { type: "date", value: filter.to })),
    field("Sending domain", input("domain", { value: filter.domain, placeholder: "example.com", spellcheck: "false" })),
    h("button.primary", { type: "submit" }, "Search")));
}

function emptyText(filter) {
  const words = filter.status ? `${STATUSES.find(([code]) => code === filter.status)[1]} ` : "";
  const where = [filter.domain ? ` sent from ${filter.domain}` : "",
    filter.from || filter.to ? ` ${filter.from ? `from ${filter.from}` : ""}${filter.from && filter.to ? " " : ""}${filter.to ? `to ${filter.to}` : ""}` : ""].join("");
  if (filter.q) return `No ${words}e-mail${where} matches “${filter.q}”.`;
  return `No ${words}e-mail${where}${filter.after || filter.before ? " on this page" : ""}.`;
}

async function emailsPage(query) {
  const filter = parse(query);
  const list = await get(apiPath(filter, EMAILS_PAGE));
  if (!narrowed(filter) && !filter.after && !filter.before && !list.data.length) {
    return shell("#/emails", h("h1", "E-mails"), firstEmail());
  }
  const { newer, older } = pages(filter, list.data, list.has_more);
  return shell("#/emails", h("h1", "E-mails"), searchForm(filter), chips(filter),
    wide(table(["Subject", "To", "Status", "Sent"], emailRows(list.data), null, emptyText(filter))),
    newer || older ? h("div.pager", { role: "navigation", "aria-label": "Pages of e-mails" },
      newer ? h("a.button", { href: newer }, "← Newer") : null, older ? h("a.button", { href: older }, "Older →") : null) : null);
}

export const nav = ["#/emails", "E-mails"];
export const routes = [
  [/^#\/emails(?:\?(.*))?$/, (m) => emailsPage(m[1] || "")],
];
