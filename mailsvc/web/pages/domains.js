// Domains: the list, and one domain with its DNS records, live DNS, DMARC reports and settings.

import { del, get, patch, post } from "/ui/api.js";
import { dmarcCard } from "/ui/deliverability.js";
import { ago, badge, copyButton, field, h, table } from "/ui/dom.js";
import { action, form, heading, input, opener, route, select, shell } from "/ui/ui.js";

async function domainsPage() {
  const list = await get("/dashboard/domains");
  const card = h("section.card", h("h2", "Add a domain"), form(async (data) => {
      const made = await post("/dashboard/domains", { name: data.get("name") });
      location.hash = `#/domains/${made.id}`;
    }, h("div.inline", field("Domain name", input("name", { required: true, placeholder: "example.com" })),
      h("button.primary", { type: "submit" }, "Add domain"))));
  return shell("#/domains", heading("Domains", opener("New domain", card, !list.data.length)), card,
    table(["Domain", "Status", "Region", "Created"], list.data.map((d) => h("tr",
      h("td", h("a.clip", { href: `#/domains/${d.id}`, title: d.name }, d.name)), h("td", badge(d.status)), h("td.low", d.region),
      h("td", ago(d.created_at)))),
    null, "No domain yet: add a domain (New domain), the one after the @ of your From addresses, then publish the DNS records "
      + "it shows. Until then, send from onboarding@resend.dev to the test addresses (delivered@resend.dev)."));
}

/** The records to publish. Its columns keep their widths at every screen size (a fixed layout,
 *  scrolling sideways in its box on a phone): a long name or value wraps beside its copy button,
 *  and the type and the statuses never break. */
function recordsTable(records, liveCells) {
  const node = table(["Type", "Name", "Value", "Status", "DNS now"], records.map((r, i) => h("tr",
    h("td.kind", r.type, r.priority !== undefined ? ` ${r.priority}` : ""),
    h("td.name", h("code", r.name), copyButton(r.name, "Copy name")),
    h("td.value", h("code", r.value), copyButton(r.value, "Copy value")),
    h("td.state", badge(r.status)), liveCells[i])));
  node.classList.add("records");
  return node;
}

async function domainPage(id) {
  const path = `/dashboard/domains/${encodeURIComponent(id)}`;
  const domain = await get(path);
  // What DNS answers now is looked up live: the page shows first, the answers fill in.
  const cells = domain.records.map(() => h("td.state", { "aria-live": "polite" }, "checking…"));
  get(`${path}/dns`).then((live) => {
    domain.records.forEach((r, i) => {
      const found = live.data.find((x) => x.name === r.name && x.type === r.type && x.value === r.value);
      cells[i].replaceChildren(found ? badge(found.live) : "—");
    });
  }).catch(() => cells.forEach((c) => c.replaceChildren("unavailable")));
  return shell("#/domains",
    h("p", h("a", { href: "#/domains" }, "← All domains")),
    h("h1", domain.name, " ", badge(domain.status)),
    h("section.card", h("h2", "DNS records"),
      h("p.muted", `Publish these records in the zone of ${domain.name}, then verify.`),
      recordsTable(domain.records, cells)),
    dmarcCard(path),
    h("section.card", h("h2", "Verify"), action("Verify now", async () => {
      await post(`${path}/verify`);
      route();
    }, "primary")),
    h("section.card", h("h2", "TLS policy"), form(async (data) => {
      await patch(path, { tls: data.get("tls") });
      return h("p.ok", "Saved.");
    }, field("When delivering", select("tls", [["opportunistic", "Opportunistic: TLS when offered"],
      ["enforced", "Enforced: never in plain text"]], domain.tls)), h("button.primary", { type: "submit" }, "Save"))),
    h("section.card", h("h2", "Set up with Cloudflare"), form(async (data) => {
      const done = await post(`${path}/dns-provider/cloudflare`, { api_token: data.get("api_token") });
      return h("p.ok", `Records written${done && done.zone ? ` to ${done.zone}` : ""}.`);
    }, field("Cloudflare API token", input("api_token", { type: "password", required: true, autocomplete: "off" }),
      "A token with DNS Edit and Zone Read on this zone; it is used once and not kept."),
    h("button.primary", { type: "submit" }, "Write the records"))),
    h("section.card", h("h2", "Delete"), action(`Delete ${domain.name}`, async () => {
      await del(path);
      location.hash = "#/domains";
    }, "danger small")));
}

export const nav = ["#/domains", "Domains"];
export const routes = [
  [/^#\/domains\/([\w-]+)$/, (m) => domainPage(m[1])],
  [/^#\/domains$/, () => domainsPage()],
];
