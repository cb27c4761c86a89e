// Broadcasts: compose (from scratch or from a template), segment with its size, from among the
// verified domains, preview text, placeholders from a menu, preview as a contact, send now or
// schedule, a live progress bar, the stats by outcome as a chart, cancel and duplicate.

import { del, get, patch, post } from "/ui/api.js";
import { ago, badge, clip, field, h, svg, table, when } from "/ui/dom.js";
import { apiQuery, listState, pagesOf } from "/ui/listing.js";
import { previewFrame, spamScoreView } from "/ui/content.js";
import { addressList } from "/ui/autosave.js";
import { PLACEHOLDERS, insertPlaceholder } from "/ui/placeholders.js";
import * as ui from "/ui/ui.js";
import { reasonText } from "/ui/words.js";
import { progressOf } from "/ui/broadcast.js";

const OUTCOMES = ["delivered", "bounced", "complained", "suppressed", "failed", "delivery_delayed"];
const COLOURS = { delivered: "#16a34a", bounced: "#dc2626", complained: "#9333ea", suppressed: "#6b7280", failed: "#b91c1c", delivery_delayed: "#d97706" };
const CANCEL_WHY = {
  draft: "A draft is not scheduled or sending: there is nothing to cancel.",
  sent: "It has been sent.", canceled: "It is already canceled.", failed: "It failed; nothing is being sent.",
};

export const nav = ["#/broadcasts", "Broadcasts"];
export const routes = [
  [/^#\/broadcasts\/([\w-]+)$/, (m) => broadcastPage(ui, m[1])],
  [/^#\/broadcasts(?:\?(.*))?$/, (m) => broadcastsPage(ui, m[1] || "")],
];

function insertAtCursor(area, text) {
  const { value, caret } = insertPlaceholder(area.value, area.selectionStart, area.selectionEnd, text);
  area.value = value;
  area.selectionStart = area.selectionEnd = caret;
  area.focus();
}

const BROADCASTS_PAGE = 50;

/** The segment a new broadcast goes to; with no segment yet, what to do first, in words. */
function segmentField(segments) {
  if (!segments.length) {
    return h("div.field", h("p#no-segment.muted", "There is no segment yet: a broadcast goes to the contacts of a segment. ",
      h("a", { href: "#/contacts" }, "Make one on the Contacts and segments page"), " (New segment), then come back."));
  }
  return field("Segment", h("select", { name: "segment_id", required: true }, segments.map((s) =>
    h("option", { value: s.id }, `${s.name} (${s.contacts.toLocaleString("en")} contacts)`))));
}

async function broadcastsPage(ui, query) {
  const state = listState(query);
  const [list, sizes, domains, templates] = await Promise.all([get(`/dashboard/broadcasts?${apiQuery(state, BROADCASTS_PAGE)}`),
    get("/dashboard/segment-sizes"),
    get("/dashboard/domains"), get("/dashboard/templates?limit=100")]);
  const verified = domains.data.filter((d) => d.status === "verified").map((d) => d.name);
  const names = Object.fromEntries(sizes.data.map((s) => [s.id, s.name]));
  const html = h("textarea.code", { name: "html", rows: 10, spellcheck: "false" }, "<p>Hello {{{FIRST_NAME|there}}},</p>\n");
  const menu = h("select", {}, PLACEHOLDERS.map(([v, label]) => h("option", { value: v }, label)));
  const fromTemplate = h("select", { name: "template" }, h("option", { value: "" }, "From scratch"),
    templates.data.map((t) => h("option", { value: t.id }, t.name)));
  fromTemplate.addEventListener("change", async () => {
    if (!fromTemplate.value) return;
    const t = await get(`/dashboard/templates/${fromTemplate.value}`);
    html.value = t.html || "";
    const form = fromTemplate.form;
    if (t.subject && !form.subject.value) form.subject.value = t.subject;
    if (t.from && !form.from.value) form.from.value = t.from;
  });
  const card = h("section.card", h("h2", "New broadcast"), ui.form(async (data) => {
      const made = await post("/dashboard/broadcasts", {
        name: data.get("name"), segment_id: data.get("segment_id"), from: data.get("from"), subject: data.get("subject"),
        preview_text: data.get("preview_text"), html: data.get("html"),
      });
      location.hash = `#/broadcasts/${made.id}`;
    }, h("div.inline", field("Name", ui.input("name", { maxlength: 256 })),
      segmentField(sizes.data)),
    h("div.inline", field("From", ui.input("from", { required: true, list: "bc-from", value: verified[0] ? `news@${verified[0]}` : "" }),
      verified.length ? `Verified domains: ${verified.join(", ")}` : "No verified domain yet"),
    h("datalist#bc-from", { id: "bc-from" }, verified.map((d) => h("option", { value: `news@${d}` }))),
    field("Subject", ui.input("subject", { required: true }))),
    field("Preview text", ui.input("preview_text", { maxlength: 1000 })),
    field("Start from", fromTemplate),
    h("div.inline", field("Insert placeholder", menu),
      h("button.secondary.small", { type: "button", onclick: () => insertAtCursor(html, menu.value) }, "Insert")),
    field("HTML", html),
    h("button.primary", { type: "submit" }, "Create draft")));
  const first = !state.after && !state.before;
  return ui.shell("#/broadcasts", ui.heading("Broadcasts", ui.opener("New broadcast", card, first && !list.data.length)), card,
    h("section.card", ui.wide(table(["Name", "Segment", "Status", "Created", "Sent"], list.data.map((b) => h("tr",
      h("td", h("a.clip", { href: `#/broadcasts/${b.id}`, title: b.name || "(unnamed)" }, b.name || "(unnamed)")),
      h("td", names[b.segment_id] ? clip(names[b.segment_id]) : "—"),
      h("td", badge(b.status)), h("td.nowrap", ago(b.created_at)), h("td.nowrap", ago(b.sent_at)))), "Broadcasts",
      first ? "No broadcast yet: write one (New broadcast); it goes to every contact of a segment." : "No broadcast on this page.")),
    ui.pager("Pages of broadcasts", pagesOf("#/broadcasts", state, list.data, list.has_more))));
}

function statsChart(stats) {
  const max = Math.max(1, ...OUTCOMES.map((k) => stats[k] || 0));
  const rowH = 26; const width = 360;
  return svg("svg", { viewBox: `0 0 ${width} ${OUTCOMES.length * rowH}`, role: "img", class: "chart outcomes", "aria-label": "Deliveries by outcome" },
    OUTCOMES.map((k, i) => {
      const n = stats[k] || 0;
      return svg("g", { "data-outcome": k, "data-count": n },
        svg("text", { x: 0, y: i * rowH + 17, "font-size": 13, class: "label" }, k.replace("_", " ")),
        svg("rect", { x: 120, y: i * rowH + 5, height: 16, width: Math.max(n ? 2 : 0, (n / max) * 180), fill: COLOURS[k] }),
        svg("text", { x: 310, y: i * rowH + 17, "font-size": 13, class: "label" }, String(n)));
    }));
}

function progressView(b) {
  const shown = progressOf(b);
  if (shown.words) return h("div#progress", { id: "progress" }, h("p#progress-text.muted", { id: "progress-text" }, shown.words));
  const waiting = b.wait_until ? h("p.warn", `Paused (${(b.wait_reason || "").replace("_", " ")}) until ${when(b.wait_until)}.`) : null;
  return h("div#progress", { id: "progress" },
    h("progress", { max: 100, value: shown.pct, "aria-label": "Sending progress" }),
    h("p#progress-text", { id: "progress-text", "aria-live": "polite" }, shown.text),
    waiting);
}

/** A draft's fields as its PATCH takes them, read from its form as one value. */
function draftOf(form) {
  const text = (name) => form.elements[name].value;
  return { name: text("name"), segment_id: text("segment_id"), from: text("from").trim(), subject: text("subject"),
    reply_to: addressList(text("reply_to")), preview_text: text("preview_text"), html: text("html"), text: text("text") };
}

/** A draft, edited in place: every field its PATCH changes, saved a second after the typing
 *  stops ("Save draft" saves at once), with its state and Undo. */
function draftEditor(ui, b, path, sizes) {
  const html = h("textarea.code", { name: "html", rows: 10, spellcheck: "false" }, b.html || "");
  const menu = h("select", {}, PLACEHOLDERS.map(([v, label]) => h("option", { value: v }, label)));
  const status = h("div#draft-state.save-state");
  const segments = sizes.some((s) => s.id === b.segment_id) ? sizes : [{ id: b.segment_id, name: "(its segment)", contacts: 0 }, ...sizes];
  const node = h("form.draft",
    h("div.inline", field("Name", ui.input("name", { value: b.name || "", maxlength: 256 })),
      field("Segment", h("select", { name: "segment_id" }, segments.map((s) => h("option", { value: s.id, selected: s.id === b.segment_id },
        `${s.name} (${s.contacts.toLocaleString("en")} contacts)`))))),
    h("div.inline", field("From", ui.input("from", { value: b.from || "", required: true })),
      field("Subject", ui.input("subject", { value: b.subject || "", required: true }))),
    h("div.inline", field("Reply-To", ui.input("reply_to", { value: [].concat(b.reply_to || []).join(", "),
      placeholder: "Addresses, separated by commas" })),
    field("Preview text", ui.input("preview_text", { value: b.preview_text || "", maxlength: 1000 }))),
    h("div.inline", field("Insert placeholder", menu),
      h("button.secondary.small", { type: "button", onclick: () => {
        insertAtCursor(html, menu.value);
        html.dispatchEvent(new Event("input", { bubbles: true }));
      } }, "Insert")),
    field("HTML", html),
    field("Text", h("textarea.code", { name: "text", rows: 4, spellcheck: "false" }, b.text || ""), "The plain-text part (optional)"));
  const { edits, undo } = ui.autosaved(node, {
    read: () => draftOf(node),
    show: (value) => {
      for (const [name, v] of Object.entries(value)) node.elements[name].value = name === "reply_to" ? v.join(", ") : v;
    },
    save: (value) => patch(path, value),
    status,
  });
  node.addEventListener("submit", (event) => { event.preventDefault(); edits.flush(); });
  node.append(h("div.row.save-bar", h("button.primary", { type: "submit" }, "Save draft"), undo, status));
  return { card: h("section#edit.card", h("h2", "Edit"), node), edits };
}

/** A scheduled broadcast is not edited (its PATCH is refused): back to a draft first. */
function scheduledCard(ui, path) {
  return h("section#edit.card", h("h2", "Edit"),
    h("p.muted", "A scheduled broadcast cannot be changed. Cancelling the schedule makes it a draft again, to edit and send or schedule anew."),
    ui.action("Cancel the schedule to edit", async () => { await post(`${path}/cancel`); ui.route(); }, "primary"));
}

/** The preview as one of the segment's members (the newest 50 offered), with its spam score. */
function previewCard(ui, path, members, saved) {
  const frame = previewFrame("Broadcast preview");
  const spamBox = h("div#bc-spam", { id: "bc-spam" });
  const who = h("select", { "aria-label": "Preview as" }, h("option", { value: "" }, "The segment's newest member"),
    members.map((c) => h("option", { value: c.id }, c.email)));
  return h("section.card", h("h2", "Preview"), h("div.inline", field("Preview as", who),
    ui.action("Show preview", async () => {
      await saved();
      const shown = await post(`${path}/preview`, who.value ? { contact_id: who.value } : {});
      document.getElementById("bc-subject").textContent = `Subject: ${shown.subject}`;
      spamBox.replaceChildren(...[spamScoreView(shown.spam)].filter(Boolean));
      await frame.show(shown.html || "");
    }, "primary small")), h("p#bc-subject", { id: "bc-subject" }), spamBox, frame);
}

/** A draft is sent now or scheduled (a time, or words such as "in 2 hours"); what is sent is
 *  what is saved, so a change still waiting is saved first. */
function sendCard(ui, b, path, saved) {
  if (b.status !== "draft") {
    return h("section.card", h("h2", "Send"), h("p.muted", b.status === "scheduled"
      ? "Scheduled: cancel the schedule to edit it or send it now." : `It is ${b.status}: only a draft is sent.`));
  }
  return h("section.card", h("h2", "Send"),
    ui.action("Send now", async () => { await saved(); await post(`${path}/send`); ui.route(); }, "primary"),
    ui.form(async (data) => {
      const at = data.get("when_text") || (data.get("when_date") ? new Date(data.get("when_date")).toISOString() : "");
      if (!at) throw new Error("Choose a date or write when, e.g. “in 2 hours”.");
      await saved();
      // Scheduling is the send call with a time (a PATCH does not schedule); the page then
      // shows the parsed time (#scheduled).
      await post(`${path}/send`, { scheduled_at: at });
      ui.route();
    }, h("h3", "Or schedule"), h("div.inline", field("Date and time", h("input", { type: "datetime-local", name: "when_date" })),
      field("Or in words", ui.input("when_text", { placeholder: "tomorrow at 9am" }), "Within 30 days; the parsed time is shown")),
    h("button.secondary", { type: "submit" }, "Schedule")));
}

/** While it may still change (queued, sending, sent), the broadcast is read again every second
 *  (no reload) until the page is left or it has been the same for 30 s; ``show`` draws it. */
function follow(b, path, progress, show) {
  if (!["queued", "sending", "sent"].includes(b.status)) return;
  let last = JSON.stringify([b.status, b.progress, b.stats]);
  let quiet = 0;
  const tick = async () => {
    if (!document.body.contains(progress) || quiet > 30) return;
    try {
      const now = await get(path);
      const key = JSON.stringify([now.status, now.progress, now.stats]);
      quiet = key === last ? quiet + 1 : 0;
      last = key;
      show(now);
    } catch { /* next tick */ }
    setTimeout(tick, 1000);
  };
  setTimeout(tick, 1000);
}

async function broadcastPage(ui, id) {
  const path = `/dashboard/broadcasts/${id}`;
  const b = await get(path);
  const sizes = b.status === "draft" ? (await get("/dashboard/segment-sizes")).data : [];
  const editor = b.status === "draft" ? draftEditor(ui, b, path, sizes) : null;
  const saved = async () => {
    if (!editor) return;
    await editor.edits.flush();
    if (editor.edits.state === "failed") throw editor.edits.error;
  };
  const members = b.segment_id ? await get(`/dashboard/segments/${b.segment_id}/contacts?limit=50`).catch(() => ({ data: [] })) : { data: [] };
  const progress = h("div", progressView(b));
  const chart = h("div#stats", { id: "stats" }, statsChart(b.stats || {}));
  const status = h("span#bc-status", { id: "bc-status" }, badge(b.status));
  const cancel = ui.action("Cancel", async () => { await post(`${path}/cancel`); ui.route(); }, "danger small");
  const cancelWhy = h("p#cancel-why.muted");
  // Cancel follows the state as the page refreshes (a queued broadcast may be canceled, a sent one not).
  const showCancel = (state) => {
    const why = CANCEL_WHY[state];
    cancel.disabled = Boolean(why);
    cancel.title = why || "";
    cancelWhy.textContent = why ? `Cancel is unavailable: ${why}` : "";
    cancelWhy.hidden = !why;
  };
  showCancel(b.status);
  const page = ui.shell("#/broadcasts", h("h1", b.name || "Broadcast"),
    h("p", status, ` To ${b.segment_id ? "a segment" : "nobody"}, from ${b.from}: “${b.subject}”.`),
    b.scheduled_at ? h("p#scheduled", { id: "scheduled" }, `Scheduled for ${when(b.scheduled_at)} (${b.scheduled_at} UTC).`) : null,
    b.failure ? h("p.error", { role: "alert" }, `${reasonText(b.failure)}.`) : null,
    editor ? editor.card : b.status === "scheduled" ? scheduledCard(ui, path) : null,
    h("section.card", h("h2", "Progress"), progress,
      progressOf(b).words ? null : [h("h3", "Deliveries by outcome"), chart]),
    previewCard(ui, path, members.data, saved),
    sendCard(ui, b, path, saved),
    h("section.card", h("h2", "Actions"), cancel, cancelWhy,
      ui.action("Duplicate", async () => { const c = await post(`${path}/duplicate`); location.hash = `#/broadcasts/${c.id}`; }),
      ["draft", "scheduled"].includes(b.status) ? ui.action("Delete", async () => { await del(path); location.hash = "#/broadcasts"; }, "danger small")
        : h("p.muted", "Delete is unavailable: only a draft or a scheduled broadcast is deleted.")));
  follow(b, path, progress, (now) => {
    progress.replaceChildren(progressView(now));
    chart.replaceChildren(statsChart(now.stats || {}));
    status.replaceChildren(badge(now.status));
    showCancel(now.status);
  });
  return page;
}
