// The queue: the summary by state, destination and tenant with the standing holds, and per
// group retry, hold, release and bounce, each confirmed with the number of deliveries it
// touches (POST /admin/v1/queue/{action}, audited). docs/operations.md says what each does.

import { admin, get, post } from "/ui/console/api.js";
import { form, input, refresh, shell, wide } from "/ui/ui.js";
import { shown } from "/ui/display.js";
import { badge, field, h, table, when } from "/ui/dom.js";

const ACTIONS = {
  retry: "Retry now",
  hold: "Hold",
  release: "Release",
  bounce: "Bounce",
};

function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${Math.round(seconds / 3600)} h`;
}

/** The buttons of one group; a click opens a confirmation saying how many deliveries it touches. */
function actions(filter, label, group, panel) {
  return h("div.actions", Object.entries(ACTIONS).map(([verb, words]) => {
    const button = h("button.secondary.small", { type: "button", "aria-label": `${words} ${label}` }, words);
    button.addEventListener("click", () => panel.replaceChildren(confirmation(verb, filter, label, group.count, panel)));
    return button;
  }));
}

function confirmation(verb, filter, label, count, panel) {
  const what = `${ACTIONS[verb]} ${count} ${count === 1 ? "delivery" : "deliveries"} of ${label}?`;
  const node = form(async (data) => {
    const body = { ...filter };
    if (verb === "hold") body.reason = data.get("reason");
    const done = await post(admin(`/queue/${verb}`), body);
    panel.replaceChildren(h("p", { role: "status" }, `${ACTIONS[verb]}: ${done.count} touched.`));
    setTimeout(refresh, 800);
  },
  h("p", h("strong", what)),
  verb === "hold" ? field("Reason", input("reason", { required: true, maxlength: 500 }), "Shown in the summary and the audit log.") : null,
  verb === "bounce" ? h("p.muted", "They end as failed (email.failed, content_expired); the recipients are not suppressed.") : null,
  h("div.actions",
    h("button.primary", { type: "submit" }, `Confirm: ${ACTIONS[verb].toLowerCase()} ${count}`),
    h("button.secondary", { type: "button", onclick: () => panel.replaceChildren() }, "Cancel")));
  return node;
}

function responses(group) {
  // The text of an SMTP reply starts with its code already; the remote server chose the rest.
  return group.top_responses.map((r) => h("div", `${r.count} × ${shown(r.text.startsWith(String(r.code)) ? r.text : `${r.code ?? ""} ${r.text}`)}`));
}

function groupTable(title, key, rows, labelOf, filterOf) {
  const panel = h("div.confirm", { "aria-live": "polite" });
  const body = rows.map((g) => h("tr",
    h("td", labelOf(g)), h("td", String(g.count)),
    h("td", `${g.states.due} due · ${g.states.deferred} deferred · ${g.states.in_flight} in flight · ${g.states.held} held`),
    h("td", age(g.oldest_age_seconds)), h("td", when(g.next_attempt_at)), h("td", responses(g)),
    h("td", g.hold ? [badge("held"), ` ${shown(g.hold.reason)}`] : "—"),
    h("td", actions(filterOf(g), labelOf(g), g, panel))));
  return h("section.card", { "aria-label": title }, h("h2", title), panel,
    wide(table([key, "Count", "States", "Oldest", "Next attempt", "Last responses", "Hold", "Actions"], body, null, "Nothing queued.")));
}

async function queuePage() {
  const summary = await get(admin("/queue"));
  const states = summary.by_state.map((s) => h("tr", h("td", s.state), h("td", String(s.count)), h("td", age(s.oldest_age_seconds))));
  const holdPanel = h("div.confirm", { "aria-live": "polite" });
  const holds = summary.holds.map((hold) => {
    const filter = hold.kind === "destination" ? { destination: hold.value } : { tenant_id: hold.value };
    const label = `${hold.kind} ${shown(hold.value)}`;
    const release = h("button.secondary.small", { type: "button", "aria-label": `Release ${label}` }, "Release");
    const groups = hold.kind === "destination" ? summary.by_destination : summary.by_tenant;
    const group = groups.find((g) => (hold.kind === "destination" ? g.destination : g.tenant_id) === hold.value);
    const count = group ? group.count : 0;
    release.addEventListener("click", () => holdPanel.replaceChildren(confirmation("release", filter, label, count, holdPanel)));
    return h("tr", h("td", hold.kind), h("td", shown(hold.value)), h("td", shown(hold.reason)), h("td", shown(hold.created_by)),
      h("td", when(hold.created_at)), h("td", release));
  });
  return shell("#/queue",
    h("h1", "Queue"),
    h("p.muted", `As of ${when(summary.generated_at)} (kept up to ten seconds).`),
    h("section.card", h("h2", "By state"), table(["State", "Count", "Oldest"], states, null, "The queue is empty.")),
    groupTable("By destination", "Destination", summary.by_destination, (g) => shown(g.destination), (g) => ({ destination: g.destination })),
    groupTable("By tenant", "Tenant", summary.by_tenant, (g) => shown(g.tenant_name || g.tenant_id), (g) => ({ tenant_id: g.tenant_id })),
    h("section.card", h("h2", "Standing holds"), holdPanel,
      wide(table(["Kind", "Value", "Reason", "By", "Since", ""], holds, null, "No standing hold."))));
}

export const nav = ["#/queue", "Queue"];
export const routes = [[/^#\/queue$/, () => queuePage()]];
