// E-mails: the list (by status, a search, a page at a time; the filter in the hash), and one e-mail with its parts, attachments and events.

import { get } from "/ui/api.js";
import { STATUSES, apiPath, moved, pages, parse, toHash } from "/ui/emailfilter.js";
import { ago, badge, clip, copyButton, copyable, field, h, table, when } from "/ui/dom.js";
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
    h("pre.snippet", h("code", snippet)), copyButton(snippet, "Copy the code"),
    h("p.muted", `${then} To send from your own addresses, `, h("a", { href: "#/domains" }, "add a domain"), "."));
}

const EMAILS_PAGE = 50;

/** The status chips: links to the list filtered so, the current one marked. */
function chips(filter) {
  return h("div.chips", { role: "group", "aria-label": "Filter by status" }, STATUSES.map(([code, label]) => h("a.chip-link", {
    href: toHash(moved(filter, { status: code })), "aria-current": code === filter.status ? "true" : null,
  }, label)));
}

async function emailsPage(query) {
  const filter = parse(query);
  const list = await get(apiPath(filter, EMAILS_PAGE));
  const filtered = filter.status || filter.q || filter.after || filter.before;
  if (!filtered && !list.data.length) return shell("#/emails", h("h1", "E-mails"), firstEmail());
  const search = form(async (data) => {
    location.hash = toHash(moved(filter, { q: String(data.get("q") || "").trim() }));
  }, h("div.inline", field("Search subject, sender or recipient", input("q", { type: "search", value: filter.q }),
    "Or paste an e-mail's id."),
  h("button.primary", { type: "submit" }, "Search")));
  const { newer, older } = pages(filter, list.data, list.has_more);
  const words = STATUSES.find(([code]) => code === filter.status)[1];
  const empty = filter.q ? `No ${filter.status ? `${words} ` : ""}e-mail matches “${filter.q}”.`
    : `No ${words} e-mail${filter.after || filter.before ? " on this page" : ""}.`;
  return shell("#/emails", h("h1", "E-mails"), search, chips(filter),
    wide(table(["Subject", "To", "Status", "Sent"], emailRows(list.data), null, empty)),
    newer || older ? h("div.pager", { role: "navigation", "aria-label": "Pages of e-mails" },
      newer ? h("a.button", { href: newer }, "← Newer") : null, older ? h("a.button", { href: older }, "Older →") : null) : null);
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
    h("section.card", h("h2", "Headers"), h("dl.pairs", h("dt", "Id"), h("dd", copyable(email.id, "Copy id")),
      headers.filter(([, v]) => v).flatMap(([k, v]) => [h("dt", k), h("dd", k === "Status" ? badge(v) : v)]))),
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

export const nav = ["#/emails", "E-mails"];
export const routes = [
  [/^#\/emails\/([\w-]+)$/, (m) => emailPage(m[1])],
  [/^#\/emails(?:\?(.*))?$/, (m) => emailsPage(m[1] || "")],
];
