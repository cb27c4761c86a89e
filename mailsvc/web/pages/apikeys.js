// API keys: create (the token shown once), rename, revoke.

import { del, get, patch, post } from "/ui/api.js";
import { ago, copyButton, field, h, table } from "/ui/dom.js";
import { action, form, heading, input, opener, route, select, shell } from "/ui/ui.js";

function madeBy(by) {
  if (!by) return "—";
  if (by.type === "user") return by.user_id ? by.email : `${by.email} (removed)`;
  return by.type === "operator" ? "Operator" : "API";
}

async function apiKeysPage() {
  const list = await get("/dashboard/api-keys");
  const card = h("section.card", h("h2", "Create a key"), form(async (data, node) => {
      const made = await post("/dashboard/api-keys", { name: data.get("name"), permission: data.get("permission") });
      node.reset();
      return h("div.token", { id: "new-token" },
        h("p", "Your new key. It is shown only this once: copy it now."),
        h("code", made.token), " ", copyButton(made.token, "Copy key"),
        h("p", h("a", { href: "#/api-keys", onclick: () => setTimeout(route) }, "Done")));
    }, h("div.inline", field("Name", input("name", { required: true, maxlength: 50 })),
      field("Permission", select("permission", [["full_access", "Full access"], ["sending_access", "Sending only"]], "full_access")),
      h("button.primary", { type: "submit" }, "Create"))));
  return shell("#/api-keys", heading("API keys", opener("New key", card, !list.data.length)), card,
    table(["Name", "Made by", "Created", "Last used", ""], list.data.map((k) => {
      const name = input("name", { value: k.name, "aria-label": `New name for ${k.name}` });
      return h("tr",
        h("td", name), h("td.low", madeBy(k.created_by)), h("td", ago(k.created_at)), h("td", ago(k.last_used_at)),
        h("td.actions", action("Rename", async () => { await patch(`/dashboard/api-keys/${k.id}`, { name: name.value }); route(); }),
          action("Revoke", async () => { await del(`/dashboard/api-keys/${k.id}`); route(); }, "danger small")));
    }), null, "No key yet: create one (New key) to send with the API or an SDK."));
}

export const nav = ["#/api-keys", "API keys"];
export const routes = [[/^#\/api-keys$/, () => apiKeysPage()]];
