// Settings: the account, its users (invite, new password link, remove), one's own password.

import { del, get, post, session } from "/ui/api.js";
import { ago, badge, copyButton, copyable, field, h, table } from "/ui/dom.js";
import { action, form, input, route, select, shell } from "/ui/ui.js";

// Removing a user who made API keys: their keys go on working after them (a full-access one
// too) unless revoked, so a dialog lists them and asks. Answers "revoke", "keep" or "" (cancel).
function askAboutKeys(user, keys) {
  return new Promise((resolve) => {
    const choice = (value, label, cls) => h(`button.${cls}`, { type: "button", value }, label);
    const dialog = h("dialog.confirm", { "aria-labelledby": "remove-user-title" },
      h("h2", { id: "remove-user-title" }, `Remove ${user.email}?`),
      h("p", `${user.email} made ${keys.length === 1 ? "this API key" : `these ${keys.length} API keys`}.`
        + " Keys keep working after their maker is removed, unless you revoke them:"),
      h("ul", keys.map((k) => h("li", h("strong", k.name), " — created ", ago(k.created_at), ", last used ", k.last_used_at ? ago(k.last_used_at) : "never"))),
      h("div.inline", choice("revoke", "Remove and revoke the keys", "danger"),
        choice("keep", "Remove, keep the keys", "secondary"), choice("", "Cancel", "secondary")));
    dialog.addEventListener("click", (event) => {
      const button = event.target.closest("button");
      if (button) dialog.close(button.value);
    });
    dialog.addEventListener("close", () => { dialog.remove(); resolve(dialog.returnValue); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

async function removeUser(user) {
  const keys = (await get("/dashboard/api-keys")).data.filter((k) => k.created_by && k.created_by.user_id === user.id);
  const choice = keys.length ? await askAboutKeys(user, keys) : "keep";
  if (!choice) return;
  await del(`/dashboard/users/${user.id}${choice === "revoke" ? "?revoke_keys=true" : ""}`);
  route();
}

async function settingsPage() {
  const me = session.me;
  const users = await get("/dashboard/users");
  const owner = me.role === "owner";
  const a = me.account;
  return shell("#/settings", h("h1", "Settings"),
    h("section.card", h("h2", "Account"), h("dl.pairs",
      [["Name", a.name], ["Plan", a.plan], ["Status", a.status], ["Daily quota", a.daily_quota], ["Monthly quota", a.monthly_quota],
        ["Domains", a.max_domains === null ? "unlimited" : a.max_domains], ["Send rate", `${a.send_rate_per_sec}/s`],
        ["API rate", `${a.api_rate_per_sec}/s`]].flatMap(([k, v]) => [h("dt", k), h("dd", String(v))]))),
    h("section.card", h("h2", "Users"),
      table(["Address", "Role", "Status", ""], users.data.map((u) => h("tr",
        h("td", copyable(u.email, "Copy address")), h("td", u.role), h("td", badge(u.status)),
        h("td.actions", owner && u.id !== me.id ? [
          action("New password link", async (ev) => {
            const made = await post(`/dashboard/users/${u.id}/password-link`);
            document.getElementById("invite-status").replaceChildren(linkShown(made));
          }),
          action("Remove", () => removeUser(u), "danger small")] : null)))),
      h("div#invite-status", { id: "invite-status", role: "status" }),
      owner ? form(async (data, node) => {
        const made = await post("/dashboard/users", { email: data.get("email"), role: data.get("role") });
        node.reset();
        return linkShown(made);
      }, h("h3", "Invite a user"), h("div.inline", field("E-mail address", input("email", { type: "email", required: true })),
        field("Role", select("role", [["member", "Member"], ["owner", "Owner"]], "member")),
        h("button.primary", { type: "submit" }, "Invite"))) : h("p.muted", "Only owners invite users.")),
    h("section.card", h("h2", "Change your password"), form(async (data, node) => {
      const me2 = await post("/dashboard/password", { current_password: data.get("current"), password: data.get("password") });
      session.csrf = me2.csrf_token;
      node.reset();
      return h("p.ok", "Password changed; your other sessions were signed out.");
    }, field("Current password", input("current", { type: "password", autocomplete: "current-password", required: true })),
    field("New password", input("password", { type: "password", autocomplete: "new-password", required: true, minlength: 10 })),
    h("button.primary", { type: "submit" }, "Change password"))));
}

function linkShown(made) {
  return h("div.token", h("p", `Send this link to ${made.email}; it works once:`),
    h("code", made.set_password_url), " ", copyButton(made.set_password_url, "Copy link"));
}

export const nav = ["#/settings", "Settings"];
export const routes = [[/^#\/settings$/, () => settingsPage()]];
