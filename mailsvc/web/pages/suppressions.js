// Suppressions: the addresses mail is not sent to, by origin, a page at a time; add and remove.

import { del, get, post } from "/ui/api.js";
import { ago, badge, copyable, field, h, table } from "/ui/dom.js";
import { apiQuery, listHash, listState, pagesOf } from "/ui/listing.js";
import { action, form, heading, input, opener, pager, route, select, shell } from "/ui/ui.js";

const SUPPRESSIONS_PAGE = 50;
const ORIGINS = [["", "All origins"], ["hard_bounce", "Hard bounce"], ["complaint", "Complaint"],
  ["unsubscribe", "Unsubscribe"], ["manual", "Manual"]];

async function suppressionsPage(query) {
  const state = listState(query, ["origin"]);
  if (!ORIGINS.some(([code]) => code === state.origin)) state.origin = "";
  const list = await get(`/dashboard/suppressions?${apiQuery(state, SUPPRESSIONS_PAGE)}`);
  const filter = select("origin", ORIGINS, state.origin);
  filter.addEventListener("change", () => { location.hash = listHash("#/suppressions", { origin: filter.value }); });
  const card = h("section.card", h("h2", "Add an address"), form(async (data) => {
    await post("/dashboard/suppressions", { email: data.get("email") });
    route();
  }, h("div.inline", field("E-mail address", input("email", { type: "email", required: true })),
    h("button.primary", { type: "submit" }, "Suppress"))));
  const first = !state.origin && !state.after && !state.before;
  return shell("#/suppressions", heading("Suppressions", opener("Add an address", card, first && !list.data.length)), card,
    field("Origin", filter),
    table(["Address", "Origin", "Since", ""], list.data.map((s) => h("tr",
      h("td", copyable(s.email, "Copy address")), h("td", badge(s.origin || "")), h("td.nowrap", ago(s.created_at)),
      h("td", action("Remove", async () => { await del(`/dashboard/suppressions/${encodeURIComponent(s.id || s.email)}`); route(); })))),
    null, emptyText(state)),
    pager("Pages of suppressions", pagesOf("#/suppressions", state, list.data, list.has_more)));
}

function emptyText(state) {
  if (state.after || state.before) return "No address on this page.";
  if (state.origin) return "No address of this origin.";
  return "No suppressed address. An address that bounces hard, complains or unsubscribes is added here, and mail to "
    + "it is not sent; add one (Add an address) to stop mail to it yourself.";
}

export const nav = ["#/suppressions", "Suppressions"];
export const routes = [[/^#\/suppressions(?:\?(.*))?$/, (m) => suppressionsPage(m[1] || "")]];
