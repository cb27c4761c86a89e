// The audit log, newest first: who did what (queue actions, tenants, tokens, set-password links).

import { admin, get } from "/ui/console/api.js";
import { shell, wide } from "/ui/ui.js";
import { shown } from "/ui/display.js";
import { h, table, when } from "/ui/dom.js";

function text(value) {
  return value && Object.keys(value).length ? shown(JSON.stringify(value)) : "—";
}

async function auditPage(match) {
  const after = match[1];
  const page = await get(admin(`/audit?limit=50${after ? `&after=${encodeURIComponent(after)}` : ""}`));
  const rows = page.data.map((e) => h("tr",
    h("td", when(e.at)), h("td", shown(e.actor)), h("td", shown(e.action)), h("td", e.count === null ? "—" : String(e.count)),
    h("td", h("code", text(e.filter))), h("td", h("code", text(e.detail)))));
  const last = page.data[page.data.length - 1];
  return shell("#/audit", h("h1", "Audit log"),
    h("section.card", wide(table(["When", "Who", "Action", "Count", "Filter", "Detail"], rows, null, "Nothing yet.")),
      h("div.pager",
        after ? h("a", { href: "#/audit" }, "Newest") : null,
        page.has_more && last ? h("a", { href: `#/audit/${last.id}` }, "Older") : null)));
}

export const nav = ["#/audit", "Audit log"];
export const routes = [[/^#\/audit(?:\/([\w-]+))?$/, (m) => auditPage(m)]];
