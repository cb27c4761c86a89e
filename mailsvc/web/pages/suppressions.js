// Suppressions: the addresses mail is not sent to, by origin; add and remove.

import { del, get, post } from "/ui/api.js";
import { ago, badge, copyable, field, h, table } from "/ui/dom.js";
import { action, form, heading, input, opener, route, select, shell } from "/ui/ui.js";

async function suppressionsPage(origin) {
  const list = await get(`/dashboard/suppressions${origin ? `?origin=${encodeURIComponent(origin)}` : ""}`);
  const filter = select("origin", [["", "All origins"], ["hard_bounce", "Hard bounce"], ["complaint", "Complaint"],
    ["unsubscribe", "Unsubscribe"], ["manual", "Manual"]], origin || "");
  filter.addEventListener("change", () => { location.hash = filter.value ? `#/suppressions?origin=${filter.value}` : "#/suppressions"; });
  const card = h("section.card", h("h2", "Add an address"), form(async (data) => {
      await post("/dashboard/suppressions", { email: data.get("email") });
      route();
    }, h("div.inline", field("E-mail address", input("email", { type: "email", required: true })),
      h("button.primary", { type: "submit" }, "Suppress"))));
  return shell("#/suppressions", heading("Suppressions", opener("Add an address", card, !origin && !list.data.length)), card,
    field("Origin", filter),
    table(["Address", "Origin", "Since", ""], list.data.map((s) => h("tr",
      h("td", copyable(s.email, "Copy address")), h("td", badge(s.origin || "")), h("td", ago(s.created_at)),
      h("td", action("Remove", async () => { await del(`/dashboard/suppressions/${encodeURIComponent(s.id || s.email)}`); route(); })))),
    null, origin ? "No address of this origin." : "No suppressed address. An address that bounces hard, complains or "
      + "unsubscribes is added here, and mail to it is not sent; add one (Add an address) to stop mail to it yourself."));
}

export const nav = ["#/suppressions", "Suppressions"];
export const routes = [[/^#\/suppressions(?:\?origin=(\w+))?$/, (m) => suppressionsPage(m[1])]];
