// Tenants: searched by name and status; one tenant's plan, usage against its quotas, and
// suspend or resume with a reason (PATCH /admin/v1/tenants/{id}, audited).

import { admin, get, patch } from "/ui/console/api.js";
import { form, input, shell } from "/ui/ui.js";
import { shown } from "/ui/display.js";
import { badge, field, h, table, when } from "/ui/dom.js";

const STATUSES = [["", "Any status"], ["active", "active"], ["paused", "paused"], ["suspended", "suspended"]];

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  return q.toString();
}

async function listPage(match) {
  const params = Object.fromEntries(new URLSearchParams(match[1] || ""));
  const page = await get(admin(`/tenants?${query({ q: params.q, status: params.status, after: params.after, limit: 50 })}`));
  const search = form((data) => {
    location.hash = `#/tenants?${query({ q: data.get("q"), status: data.get("status") })}`;
  },
  h("div.inline",
    field("Name contains", input("q", { type: "search", value: params.q || "" })),
    field("Status", h("select", { name: "status" },
      STATUSES.map(([v, label]) => h("option", { value: v, selected: v === (params.status || "") }, label)))),
    h("button.primary", { type: "submit" }, "Search")));
  const rows = page.data.map((t) => h("tr",
    h("td", h("a", { href: `#/tenants/${t.id}` }, shown(t.name))), h("td", t.plan),
    h("td", badge(t.status), t.status_reason ? h("span.muted", ` ${shown(t.status_reason)}`) : null),
    h("td", when(t.created_at))));
  const last = page.data[page.data.length - 1];
  return shell("#/tenants", h("h1", "Tenants"), h("section.card", search),
    h("section.card", table(["Name", "Plan", "Status", "Created"], rows, null, "No tenant matches."),
      page.has_more && last
        ? h("div.pager", h("a", { href: `#/tenants?${query({ ...params, after: last.id })}` }, "Next page")) : null));
}

function meter(label, used, limit) {
  return h("div.meter",
    h("div.meter-label", h("span", label), h("span", `${used.toLocaleString()} / ${limit.toLocaleString()}`)),
    h("progress", { max: Math.max(limit, 1), value: Math.min(used, limit), "aria-label": `${label}: ${used} of ${limit}` }));
}

async function tenantPage(match) {
  const id = match[1];
  const [tenant, usage] = await Promise.all([get(admin(`/tenants/${id}`)), get(admin(`/tenants/${id}/usage`))]);
  const suspended = tenant.status !== "active";
  const change = form(async (data) => {
    const body = suspended ? { status: "active" } : { status: "suspended", status_reason: data.get("reason") };
    await patch(admin(`/tenants/${id}`), body);
    location.hash = `#/tenants/${id}?changed=${Date.now()}`;
  },
  suspended ? null : field("Reason", input("reason", { required: true, maxlength: 500 }), "Shown to the tenant, and kept in the audit log."),
  h(`button.${suspended ? "primary" : "danger"}`, { type: "submit" }, suspended ? "Resume" : "Suspend"));
  return shell("#/tenants",
    h("h1", shown(tenant.name)),
    h("section.card",
      h("p", "Plan ", h("strong", tenant.plan), " · status ", badge(tenant.status),
        tenant.status_reason ? h("span", { id: "status-reason" }, ` ${shown(tenant.status_reason)}`) : null),
      h("p.muted", `Id ${tenant.id} · created ${when(tenant.created_at)} · delivery ${tenant.delivery_mode}`)),
    h("section.card", h("h2", "Usage"),
      meter("Recipients today", usage.day.recipients, usage.day.quota),
      meter("Recipients this month", usage.month.recipients, usage.month.quota),
      meter("AI generations this month", usage.ai.used, usage.ai.quota)),
    h("section.card", h("h2", suspended ? "Resume" : "Suspend"), change),
    h("p", h("a", { href: "#/tenants" }, "All tenants")));
}

export const nav = ["#/tenants", "Tenants"];
export const routes = [
  [/^#\/tenants\/([\w-]+)(?:\?.*)?$/, (m) => tenantPage(m)],
  [/^#\/(?:tenants)?(?:\?(.*))?$/, (m) => listPage(m)],
];
