// The waitlist, newest first, and its CSV export (the operator API's own, through the console).

import { admin, get } from "/ui/console/api.js";
import { shell } from "/ui/ui.js";
import { shown } from "/ui/display.js";
import { h, table, when } from "/ui/dom.js";

async function waitlistPage(match) {
  const after = match[1];
  const page = await get(admin(`/waitlist?limit=100${after ? `&after=${encodeURIComponent(after)}` : ""}`));
  const rows = page.data.map((e) => h("tr", h("td", shown(e.email)), h("td", when(e.created_at))));
  const last = page.data[page.data.length - 1];
  return shell("#/waitlist", h("h1", "Waitlist"),
    h("p", h("a.button.secondary", { href: admin("/waitlist?format=csv&limit=100"), download: "waitlist.csv" },
      "Export CSV (newest 100)")),
    h("section.card", table(["E-mail address", "Joined"], rows, null, "Nobody is waiting."),
      page.has_more && last ? h("div.pager", h("a", { href: `#/waitlist/${last.id}` }, "Older")) : null));
}

export const nav = ["#/waitlist", "Waitlist"];
export const routes = [[/^#\/waitlist(?:\/([\w-]+))?$/, (m) => waitlistPage(m)]];
