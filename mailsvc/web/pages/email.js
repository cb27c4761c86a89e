// One e-mail: its status and events first (each with its time and, for a bounce or a delay, the
// receiving server's answer in full), its ids each with a copy button, then its content in tabs:
// the preview (desktop or phone width, light or dark), the HTML as written, the text, the source
// (as signed, from its Inbox copy), the attachments.

import { get } from "/ui/api.js";
import { mailPreview } from "/ui/content.js";
import { ago, badge, clip, copyButton, copyable, h, table } from "/ui/dom.js";
import { answerOf, detailOf } from "/ui/events.js";
import { shell, tabs } from "/ui/ui.js";

function timeline(events) {
  if (!events.data.length) return h("ol.timeline", h("li.muted", "No events yet."));
  return h("ol.timeline", events.data.map((e) => {
    const answer = answerOf(e.data), detail = detailOf(e.data);
    const to = e.data && e.data.to ? [].concat(e.data.to).join(", ") : null;
    return h("li", badge(String(e.type).replace(/^email\./, "")), " ", ago(e.created_at),
      to ? [" ", clip(to, "span.muted.to"), " ", copyButton(to, "Copy address")] : null,
      detail ? h("span.muted", ` · ${detail}`) : null,
      answer ? h("pre.answer", { title: "The receiving server's answer" }, answer) : null);
  }));
}

function statusCard(email, events) {
  return h("section.card", h("h2", "Status"), h("p.status-line", badge(email.last_event), " ",
    h("span.muted", "since "), ago(events.data.length ? events.data[events.data.length - 1].created_at : email.created_at)),
  timeline(events),
  table(["Recipient", "Delivery", "Attempts", "Last answer"], events.deliveries.map((d) => h("tr",
    h("td.nowrap", clip(d.recipient), " ", copyButton(d.recipient, "Copy address")), h("td", badge(d.status)), h("td", String(d.attempts)), h("td", d.last_response || "—")))));
}

function detailsCard(email, more) {
  const addresses = (list) => [].concat(list || []).join(", ");
  const rows = [["From", email.from], ["To", addresses(email.to)], ["Cc", addresses(email.cc)],
    ["Bcc", addresses(email.bcc)], ["Reply-To", addresses(email.reply_to)], ["Created", ago(email.created_at)]];
  const tags = (email.tags || []).map((t) => h("span.tag", `${t.name}: ${t.value}`));
  return h("section.card", h("h2", "Details"), h("dl.pairs",
    h("dt", "Id"), h("dd", copyable(email.id, "Copy id")),
    h("dt", "Message-ID"), h("dd", more.message_id ? copyable(more.message_id, "Copy Message-ID") : "—"),
    h("dt", "Idempotency key"), h("dd", more.idempotency_key ? copyable(more.idempotency_key, "Copy key")
      : h("span.muted", "None (or expired: keys live 24 hours)")),
    h("dt", "Tags"), h("dd", tags.length ? tags : h("span.muted", "None")),
    rows.filter(([, v]) => v).flatMap(([k, v]) => [h("dt", k),
      h("dd", typeof v === "string" ? [clip(v), " ", copyButton(v, `Copy ${k}`)] : v)])));
}

function sourcePanel(more) {
  if (more.source === null) {
    return h("p.muted", "The message is built and signed at each delivery and not kept. A copy sent to a test "
      + "address (delivered@, bounced@, complained@resend.dev) is kept in the Inbox with its source as signed.");
  }
  return [h("p.muted", more.source_signed ? "As signed, from its Inbox copy." : "As it was submitted over SMTP."),
    h("pre.source", { tabindex: "0" }, more.source)];
}

function contentTabs(id, email, attachments, more) {
  const path = `/dashboard/emails/${encodeURIComponent(id)}/html`;
  return h("section.card", h("h2", "Content"), tabs("The e-mail's content", [
    ["Preview", email.html ? mailPreview(path, "preview") : h("p.muted", "No HTML part.")],
    ["HTML", email.html ? h("pre.source.html", { tabindex: "0" }, email.html) : h("p.muted", "No HTML part.")],
    ["Text", email.text ? h("pre.text", email.text) : h("p.muted", "No text part.")],
    ["Source as signed", sourcePanel(more)],
    ["Attachments", table(["File", "Type", "Size"], attachments.data.map((a) => h("tr",
      h("td", a.download_url ? h("a", { href: a.download_url, rel: "noreferrer" }, a.filename || a.id) : (a.filename || a.id)),
      h("td", a.content_type), h("td", `${a.size} B`))), null, "No attachment.")],
  ]));
}

async function emailPage(id) {
  const path = `/dashboard/emails/${encodeURIComponent(id)}`;
  const [email, events, attachments, more] = await Promise.all([
    get(path), get(`${path}/events`), get(`${path}/attachments`).catch(() => ({ data: [] })), get(`${path}/particulars`),
  ]);
  return shell("#/emails",
    h("p", h("a", { href: "#/emails" }, "← All e-mails"),
      more.inbox_id ? [" · ", h("a", { href: `#/inbox/${more.inbox_id}` }, "Its Inbox copy")] : null),
    h("h1", email.subject || "(no subject)"),
    statusCard(email, events), detailsCard(email, more), contentTabs(id, email, attachments, more));
}

export const routes = [[/^#\/emails\/([\w-]+)$/, (m) => emailPage(m[1])]];
