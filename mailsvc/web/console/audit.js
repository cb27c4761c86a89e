// The audit log, newest first: who did what (queue actions, tenants, destinations, tokens,
// set-password links), filtered by the kind of actor and by tenant (GET /admin/v1/audit).

import { admin, get } from "/ui/console/api.js";
import { form, input, shell, wide } from "/ui/ui.js";
import { shown } from "/ui/display.js";
import { field, h, table, when } from "/ui/dom.js";

const KINDS = [["", "Anyone"], ["token", "an operator token"], ["operator", "a console operator"],
  ["user", "a dashboard user"]];

function text(value) {
  return value && Object.keys(value).length ? shown(JSON.stringify(value)) : "—";
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  return q.toString();
}

async function auditPage(match) {
  const params = Object.fromEntries(new URLSearchParams(match[1] || ""));
  const filters = { actor_kind: params.actor_kind, tenant_id: params.tenant_id };
  const page = await get(admin(`/audit?${query({ ...filters, after: params.after, limit: 50 })}`));
  const filter = form((data) => {
    location.hash = `#/audit?${query({ actor_kind: data.get("actor_kind"), tenant_id: data.get("tenant_id").trim() })}`;
  },
  h("div.inline",
    field("Who", h("select", { name: "actor_kind" },
      KINDS.map(([v, label]) => h("option", { value: v, selected: v === (params.actor_kind || "") }, label)))),
    field("Tenant id", input("tenant_id", { type: "search", value: params.tenant_id || "" })),
    h("button.primary", { type: "submit" }, "Filter")));
  const rows = page.data.map((e) => h("tr",
    h("td", when(e.at)), h("td", shown(e.actor)), h("td", shown(e.action)), h("td", e.count === null ? "—" : String(e.count)),
    h("td", h("code", text(e.filter))), h("td", h("code", text(e.detail)))));
  const last = page.data[page.data.length - 1];
  return shell("#/audit", h("h1", "Audit log"), h("section.card", filter),
    h("section.card", wide(table(["When", "Who", "Action", "Count", "Filter", "Detail"], rows, null, "Nothing yet.")),
      h("div.pager",
        params.after ? h("a", { href: `#/audit?${query(filters)}` }, "Newest") : null,
        page.has_more && last ? h("a", { href: `#/audit?${query({ ...filters, after: last.id })}` }, "Older") : null)));
}

export const nav = ["#/audit", "Audit log"];
export const routes = [[/^#\/audit(?:\?(.*))?$/, (m) => auditPage(m)]];
