// Webhooks: endpoints, their events, signing secret and recent deliveries, each with every
// attempt (time, status, duration, the answer's first 2 KB, what went wrong in words), its
// payload as sent and "Retry now", and the endpoint's last 24 hours.

import { del, get, patch, post } from "/ui/api.js";
import { ago, badge, clip, copyButton, field, h, table } from "/ui/dom.js";
import { attemptError, attemptRateText, attemptWords, durationText, pretty, retryable, successText } from "/ui/hooks.js";
import { apiQuery, listState, pagesOf } from "/ui/listing.js";
import { action, form, heading, input, opener, pager, route, shell } from "/ui/ui.js";

const DELIVERIES_PAGE = 20;
/** The delivery last retried: shown open again once the page is drawn anew. */
let retried = null;

const EVENTS = ["email.sent", "email.delivered", "email.delivery_delayed", "email.bounced", "email.complained",
  "email.failed", "email.suppressed", "domain.updated", "contact.created", "contact.updated", "contact.deleted"];

function eventBoxes(chosen = []) {
  return h("fieldset.events", h("legend", "Events"), EVENTS.map((e) => {
    const box = h("input", { type: "checkbox", name: "events", value: e, checked: chosen.includes(e) });
    return h("label.check", box, e);
  }));
}

async function webhooksPage() {
  const list = await get("/dashboard/webhooks");
  const card = h("section.card", h("h2", "Add an endpoint"), form(async (data) => {
      const made = await post("/dashboard/webhooks", { endpoint: data.get("endpoint"), events: data.getAll("events") });
      location.hash = `#/webhooks/${made.id}`;
    }, field("Endpoint URL", input("endpoint", { type: "url", required: true, placeholder: "https://example.com/hooks" })),
    eventBoxes(["email.sent", "email.delivered", "email.bounced"]), h("button.primary", { type: "submit" }, "Create webhook")));
  return shell("#/webhooks", heading("Webhooks", opener("New webhook", card, !list.data.length)), card,
    table(["Endpoint", "Events", "Status", "Created"], list.data.map((w) => h("tr",
      h("td.nowrap", h("a.clip", { href: `#/webhooks/${w.id}`, title: w.endpoint }, w.endpoint), " ", copyButton(w.endpoint, "Copy URL")), h("td.low", w.events.join(", ")),
      h("td", badge(w.status)), h("td", ago(w.created_at)))), null,
    "No webhook yet. A webhook tells your application what happens to its mail as it happens: each event you choose "
      + "(sent, delivered, bounced, complained…) is posted to your endpoint, signed so that you can check it came from "
      + "here. Add an endpoint (New webhook)."));
}

async function webhookPage(id, query) {
  const path = `/dashboard/webhooks/${encodeURIComponent(id)}`;
  const state = listState(query);
  const [hook, deliveries] = await Promise.all([get(path), get(`${path}/deliveries?${apiQuery(state, DELIVERIES_PAGE)}`)]);
  const secret = hook.signing_secret;
  return shell("#/webhooks",
    h("p", h("a", { href: "#/webhooks" }, "← All webhooks")),
    h("h1", "Webhook"),
    h("section.card", h("dl.pairs", h("dt", "Endpoint"), h("dd.value", clip(hook.endpoint, "code"), " ", copyButton(hook.endpoint, "Copy URL")), h("dt", "Status"), h("dd", badge(hook.status)),
      secret ? [h("dt", "Signing secret"), h("dd.value", clip(secret, "code.secret"), " ", copyButton(secret, "Copy secret"))] : null),
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
      h("p.success", h("strong", "Last 24 hours: "), attemptRateText(deliveries.last_24_hours), " · ",
        successText(deliveries.last_24_hours)),
      table(["Event", "State", "Response", "Attempts", "Last attempt"], deliveries.data.map((d) => h("tr",
        h("td", clip(d.event)), h("td", badge(d.state)), h("td", d.response_status ? String(d.response_status) : "—"),
        h("td", String(d.attempts)), h("td", ago(d.last_attempt_at))))),
      deliveries.data.length ? h("h3", "Each delivery") : null,
      deliveries.data.map((d) => deliveryDetails(d, path, hook.status)),
      pager("Pages of deliveries", pagesOf(`#/webhooks/${id}`, state, deliveries.data, deliveries.has_more, "event_id"))));
}

/** A delivery opened: every attempt (time, HTTP status, duration, what went wrong in words, the
 *  first 2 KB of the answer), "Retry now" while it is pending or failed, and its payload as
 *  sent, with a copy button. */
function deliveryDetails(d, path, status) {
  const error = attemptError(d.response_status, d.response);
  const body = pretty(d.payload);
  return h("details.delivery", { "data-event": d.event_id, open: d.event_id === retried },
    h("summary", badge(d.state), ` ${d.event} · ${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`,
      error ? h("span.muted", ` · ${error}`) : null),
    h("dl.pairs",
      h("dt", "Event id"), h("dd.value", clip(d.event_id, "code"), " ", copyButton(d.event_id, "Copy event id")),
      h("dt", "Last attempt"), h("dd", d.last_attempt_at ? ago(d.last_attempt_at) : "Not yet"),
      d.state === "pending" ? [h("dt", "Next attempt"), h("dd", d.in_flight ? "Being made now" : ago(d.next_attempt_at))]
        : null),
    retryRow(d, path, status),
    h("h4", "Attempts"),
    d.attempts_made.length ? table(["#", "Time", "HTTP status", "Duration", "Error", "Answer"],
      d.attempts_made.map(attemptRow), `Every attempt of this ${d.event} delivery`)
      : h("p.muted", "No attempt yet."),
    h("h4", "Payload as sent"), h("pre.source", { tabindex: "0" }, body), copyButton(body, "Copy the payload"));
}

function attemptRow(a) {
  const words = attemptWords(a);
  const answer = a.response || a.detail;
  return h("tr",
    h("td", String(a.attempt)), h("td.nowrap", ago(a.at)),
    h("td", a.status !== null ? String(a.status) : "None"), h("td.nowrap", durationText(a.duration_ms)),
    h("td", words ? words : h("span.ok", "Delivered")),
    h("td.attempt-answer", answer ? h("pre.answer", { tabindex: "0", "aria-label": `Answer to attempt ${a.attempt}` }, answer)
      : h("span.muted", "Empty")));
}

/** "Retry now": the delivery is due at once (the same webhook-id, a new signature); a line
 *  saying why not for a disabled webhook or an attempt in flight. */
function retryRow(d, path, status) {
  if (d.state === "delivered") return null;
  if (status !== "enabled") return h("p.muted", "The webhook is disabled: it receives nothing. Enable it to retry.");
  if (!retryable(d, status)) return h("p.muted", "An attempt is being made now.");
  return h("div.row", action("Retry now", async () => {
    await post(`${path}/deliveries/${encodeURIComponent(d.event_id)}/retry`);
    retried = d.event_id;
    route();
  }));
}

export const nav = ["#/webhooks", "Webhooks"];
export const routes = [
  [/^#\/webhooks\/([\w-]+)(?:\?(.*))?$/, (m) => webhookPage(m[1], m[2] || "")],
  [/^#\/webhooks$/, () => webhooksPage()],
];
