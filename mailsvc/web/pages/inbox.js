// Inbox: the development inbox. What was delivered to a test address, or captured,
// listed; and one message as a receiver gets it: its HTML in the sandboxed frame at desktop or
// phone width, light or dark, its text, its source as signed, its attachments and the checks.

import { get } from "/ui/api.js";
import { mailPreview } from "/ui/content.js";
import { ago, badge, clip, h, labelled, table } from "/ui/dom.js";
import { firstEmail } from "/ui/pages/emails.js";
import { shell, wide } from "/ui/ui.js";

const INBOX_PAGE = 20;
const SIMULATED_WHY = "The test sender's mail is signed with this node's own test key and checked against that key, "
  + "never against resend.dev's DNS: these results show that the pipeline signs and aligns. A domain of yours, once "
  + "verified, is checked against the records it really publishes.";

function inboxHash(cursor) {
  return cursor ? `#/inbox?${new URLSearchParams(cursor)}` : "#/inbox";
}

function simulatedBadge(simulated) {
  return simulated ? badge("simulated") : null;
}

function messageRows(items) {
  return items.map((m) => h("tr",
    h("td.low", clip(m.from)),
    h("td", clip([].concat(m.to || []).join(", "))),
    h("td", h("a.clip", { href: `#/inbox/${m.id}`, title: m.subject || "(no subject)" }, m.subject || "(no subject)")),
    h("td.nowrap", badge(m.outcome), " ", simulatedBadge(m.simulated)),
    h("td.nowrap", ago(m.created_at))));
}

async function inboxPage(query) {
  const params = new URLSearchParams(query || "");
  const after = params.get("after"), before = params.get("before");
  const args = new URLSearchParams({ limit: String(INBOX_PAGE) });
  if (after) args.set("after", after); else if (before) args.set("before", before);
  const list = await get(`/dashboard/inbox?${args}`);
  const items = list.data;
  const intro = h("p.muted", "Every e-mail delivered to a test address (delivered@, bounced@, complained@resend.dev) "
    + "or captured, as it left the queue: signed, with a receiver's checks. The last 1,000 are kept.");
  if (!after && !before && !items.length) {
    return shell("#/inbox", h("h1", "Inbox"), intro,
      firstEmail("Then it shows here, with its HTML, its source as signed and its DKIM, SPF and DMARC checks."));
  }
  // Newest first: "Older" follows the last id, "Newer" precedes the first one.
  const older = items.length > 0 && (before || list.has_more)
    ? h("a.button", { href: inboxHash({ after: items[items.length - 1].id }) }, "Older →") : null;
  const newer = items.length > 0 && (after || (before && list.has_more))
    ? h("a.button", { href: inboxHash({ before: items[0].id }) }, "← Newer") : null;
  return shell("#/inbox", h("h1", "Inbox"), intro,
    wide(table(["From", "To", "Subject", "Outcome", "Received"], messageRows(items), null, "No message on this page.")),
    newer || older ? h("div.pager", { role: "navigation", "aria-label": "Pages of the inbox" }, newer, older) : null);
}

function previewCard(id, message) {
  if (message.html === null) return h("section.card", h("h2", "HTML"), h("p.muted", "No HTML part."));
  return h("section.card", h("h2", "HTML"), mailPreview(`/dashboard/inbox/${encodeURIComponent(id)}/html`));
}

function checkRow(name, check, simulated) {
  return h("tr",
    h("th", { scope: "row" }, name),
    h("td", check.domain || "—"),
    h("td.nowrap", badge(check.result), " ", simulatedBadge(simulated)),
    h("td", check.detail || ""));
}

function unsubscribeRow(found) {
  const present = Boolean(found.list_unsubscribe);
  const detail = present
    ? [h("code", found.list_unsubscribe), found.one_click ? " One-click (RFC 8058): List-Unsubscribe-Post is set." : ""]
    : "No List-Unsubscribe header: fine for a transactional message, required of bulk mail by the large mailbox providers.";
  return h("tr", h("th", { scope: "row" }, "List-Unsubscribe"), h("td", "—"),
    h("td.nowrap", badge(present ? (found.one_click ? "one-click" : "present") : "absent")), h("td", detail));
}

function spamRow(spam) {
  if (!spam) return null;
  if (spam.error) return h("tr", h("th", { scope: "row" }, "Spam score"), h("td", "—"), h("td", badge("unavailable")), h("td", spam.error));
  const rules = (spam.rules || []).map((r) => `${r.name} (${r.score})`).join(", ");
  return h("tr", h("th", { scope: "row" }, "Spam score"), h("td", "—"),
    h("td.nowrap", badge(spam.is_spam ? "spam" : "ham")), h("td", `${spam.score} of ${spam.threshold}`, rules ? `: ${rules}` : ""));
}

function checksCard(checks) {
  const simulated = checks.simulated;
  const dkim = checks.dkim.length
    ? checks.dkim.map((d) => checkRow(`DKIM (s=${d.selector || "?"})`, d, simulated))
    : [h("tr", h("th", { scope: "row" }, "DKIM"), h("td", "—"), h("td", badge("none")), h("td", "The message is not signed."))];
  return h("section#checks.card", h("h2", "Checks"),
    simulated ? h("p.note", badge("simulated"), " ", SIMULATED_WHY) : null,
    labelled(h("div.table-wrap.checks", h("table",
      h("thead", h("tr", ["Check", "Domain", "Result", "Why"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", dkim, checkRow("SPF", checks.spf, simulated),
        checkRow("DMARC alignment", checks.dmarc, simulated),
        unsubscribeRow(checks.list_unsubscribe), spamRow(checks.spam))))));
}

async function messagePage(id) {
  const m = await get(`/dashboard/inbox/${encodeURIComponent(id)}`);
  const summary = [["From", m.from], ["To", [].concat(m.to || []).join(", ")], ["Return-Path", m.return_path],
    ["Received", ago(m.created_at)]];
  return shell("#/inbox",
    h("p", h("a", { href: "#/inbox" }, "← Inbox"), " · ", h("a", { href: `#/emails/${m.email_id}` }, "The e-mail and its events")),
    h("h1", m.subject || "(no subject)", " ", badge(m.outcome), " ", simulatedBadge(m.simulated)),
    h("section.card", h("dl.pairs", summary.filter(([, v]) => v).flatMap(([k, v]) => [h("dt", k), h("dd", v)]))),
    m.over_limit
      ? h("section.card", h("h2", "Not parsed"), h("p", m.over_limit.message),
        h("p.muted", "The message passes a limit on its structure (", h("code", m.over_limit.setting),
          "): only its source is shown."))
      : [previewCard(id, m), checksCard(m.checks)],
    h("section.card", h("h2", "Text"), m.text !== null ? h("pre.text", m.text) : h("p.muted", "No text part.")),
    h("section.card", h("h2", "Attachments"),
      table(["File", "Type", "Disposition", "Size"], m.attachments.map((a) => h("tr",
        h("td", a.filename || "(no name)"), h("td", a.content_type), h("td", a.disposition || "attachment"),
        h("td", `${a.size} B`))), null, "No attachment.")),
    h("section.card", h("h2", "Source as signed"),
      h("p.muted", m.over_limit ? "As kept, not parsed."
        : `${m.headers.length} header fields, as the receiver gets them (the DKIM signature covers them as written).`),
      h("pre.source", { tabindex: "0" }, m.raw)));
}

export const nav = ["#/inbox", "Inbox"];
export const routes = [
  [/^#\/inbox\/([\w-]+)$/, (m) => messagePage(m[1])],
  [/^#\/inbox(?:\?(.*))?$/, (m) => inboxPage(m[1] || "")],
];
