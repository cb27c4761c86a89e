// Activity: what was done on the account, newest first: keys made and revoked, domains added,
// checked and verified, members invited and removed, sign-ins, webhook retries; each a sentence
// (activity.js), its raw code in the tooltip; filtered by kind and member, a page at a time.

import { get } from "/ui/api.js";
import { KINDS, rawCode, sentence } from "/ui/activity.js";
import { ago, field, h } from "/ui/dom.js";
import { apiQuery, listHash, listState, pagesOf } from "/ui/listing.js";
import { heading, pager, select, shell } from "/ui/ui.js";

const ACTIVITY_PAGE = 50;

function entryItem(entry) {
  const code = rawCode(entry);
  return h("li.activity-entry", { "data-action": entry.action },
    h("span.activity-what", { title: code }, sentence(entry)),
    h("span.sr-only", ` (${code})`),
    h("span.activity-when", ago(entry.at)));
}

function emptyText(state) {
  if (state.after || state.before) return "Nothing on this page.";
  if (state.kind || state.member) return "Nothing of this kind, by this member, yet.";
  return "Nothing done on the account yet.";
}

async function activityPage(query) {
  const state = listState(query, ["kind", "member"]);
  if (!KINDS.some(([code]) => code === state.kind)) state.kind = "";
  const users = await get("/dashboard/users");
  if (state.member && !users.data.some((u) => u.id === state.member)) state.member = "";
  const list = await get(`/dashboard/activity?${apiQuery(state, ACTIVITY_PAGE)}`);
  const kind = select("kind", KINDS, state.kind);
  const member = select("member", [["", "Every member"], ...users.data.map((u) => [u.id, u.email])], state.member);
  const refilter = () => { location.hash = listHash("#/activity", { kind: kind.value, member: member.value }); };
  kind.addEventListener("change", refilter);
  member.addEventListener("change", refilter);
  return shell("#/activity", heading("Activity"),
    h("p.muted", "Who did what on the account, newest first. Hover over an entry for its code."),
    h("div.inline.filters", field("Kind of action", kind), field("Member", member)),
    list.data.length
      ? h("ol.activity", { "aria-label": "Activity, newest first" }, list.data.map(entryItem))
      : h("p.muted.empty", emptyText(state)),
    pager("Pages of activity", pagesOf("#/activity", state, list.data, list.has_more)));
}

export const nav = ["#/activity", "Activity"];
export const routes = [[/^#\/activity(?:\?(.*))?$/, (m) => activityPage(m[1] || "")]];
