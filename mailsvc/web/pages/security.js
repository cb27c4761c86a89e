// Security: two-factor sign-in (an authenticator's codes, RFC 6238) with its recovery codes, an
// owner's rule that every member has it, and one's sessions (sign out one, or everywhere else).
// The second step of a sign-in is here too (``secondStep``): signin.js hands it the challenge.
// The console uses the same pieces with its own paths (console/security.js). Text-only DOM.

import { del, get, patch, post, session } from "/ui/api.js";
import { ago, badge, copyButton, field, h, table, when } from "/ui/dom.js";
import { action, form, input, route, shell, signedIn, wide } from "/ui/ui.js";

/** The secret in groups of four, as it is easiest to type into an authenticator. */
export function grouped(secret) {
  return String(secret).replace(/(.{4})(?=.)/g, "$1 ");
}

function codeInput(name = "code") {
  return input(name, { inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9 ]{6,7}", maxlength: 7 });
}

/** The sign-in's second step: a code (or a recovery code) for ``challenge``, posted to ``path``. */
export function secondStep(challenge, path) {
  let recovery = false;
  const card = h("section.card.narrow");
  const draw = () => {
    card.replaceChildren(
      h("h1", "Two-factor sign-in"),
      h("p", recovery ? `Type one of the recovery codes you saved for ${challenge.email}. Each works once.`
        : `Type the 6-digit code your authenticator app shows for ${challenge.email}.`),
      form(async (data) => {
        const typed = String(data.get("code") || "").trim();
        const body = recovery ? { challenge: challenge.challenge, recovery_code: typed }
          : { challenge: challenge.challenge, code: typed };
        signedIn(await post(path, body));
        location.replace("#/");
      },
      field(recovery ? "Recovery code" : "Code", recovery ? input("code", { autocomplete: "off", required: true })
        : codeInput(), recovery ? "Like abcde-fghij." : null),
      h("button.primary", { type: "submit" }, "Sign in")),
      action(recovery ? "Use a code from the app" : "Use a recovery code", () => { recovery = !recovery; draw(); }));
  };
  draw();
  const main = document.getElementById("main");
  main.replaceChildren(card);
  const first = card.querySelector("input");
  if (first) first.focus();
}

function recoveryList(codes) {
  return h("div",
    h("p", h("strong", "Save these recovery codes now: they are shown only this once."),
      " Each signs you in once if you lose your authenticator."),
    h("ul.codes", codes.map((c) => h("li", h("code", c)))),
    copyButton(codes.join("\n"), "Copy the codes"));
}

/** The two-factor section of ``prefix``'s person (``/dashboard`` or ``/console``). */
export async function twoFactorSection(prefix) {
  const state = await get(`${prefix}/two-factor`);
  const box = h("section.card", { id: "two-factor" }, h("h2", "Two-factor sign-in"));
  if (state.enabled) {
    box.append(
      h("p", badge("on"), ` since ${when(state.enabled_at)}; ${state.recovery_codes_left} recovery codes left.`),
      h("h3", "Turn it off"),
      form(async (data) => {
        const typed = String(data.get("code") || "").trim();
        await post(`${prefix}/two-factor/disable`, {
          password: data.get("password"), ...(typed.includes("-") ? { recovery_code: typed } : { code: typed }),
        });
        route();
      },
      field("Password", input("password", { type: "password", autocomplete: "current-password", required: true })),
      field("Code", input("code", { autocomplete: "one-time-code", required: true }), "From the app, or a recovery code."),
      h("button.danger", { type: "submit" }, "Turn off two-factor sign-in")));
    return box;
  }
  const steps = h("div");
  const setUp = action("Set up an authenticator", async () => {
    const begun = await post(`${prefix}/two-factor/begin`);
    setUp.remove();
    const link = h("code", begun.otpauth_uri);
    link.style.overflowWrap = "anywhere"; // a long link wraps on a phone (CSSOM: no inline style attribute)
    steps.replaceChildren(
        h("p", "Add this key to your authenticator app (type it, or paste the link), then type the code it shows."),
      h("dl.pairs", h("dt", "Key"), h("dd", h("code", grouped(begun.secret)), " ", copyButton(begun.secret)),
        h("dt", "Link"), h("dd", link, " ", copyButton(begun.otpauth_uri))),
      form(async (data) => {
        const done = await post(`${prefix}/two-factor/confirm`, { code: String(data.get("code") || "").trim() });
        if (session.me) session.me.two_factor_enrolment_required = false;
        box.replaceChildren(h("h2", "Two-factor sign-in is on"), recoveryList(done.recovery_codes),
          action("Done", async () => { location.replace("#/security"); route(); }, "primary"));
      },
      field("Code", codeInput()),
      h("button.primary", { type: "submit" }, "Turn on")));
  }, "primary");
  box.append(
    h("p", "Sign in with your password and a code from an authenticator app (any app that reads otpauth:// keys)."),
    steps, setUp);
  return box;
}

async function requirementSection() {
  const state = await get("/dashboard/two-factor");
  const on = state.required_by_account;
  return h("section.card", h("h2", "Every member"),
    h("p", on ? "Every member of the account must use two-factor sign-in: one without it sets it up before anything else."
      : "Members may sign in with a password alone."),
    action(on ? "No longer require it" : "Require two-factor sign-in of every member", async () => {
      await patch("/dashboard/security", { require_two_factor: !on });
      route();
    }, on ? "secondary" : "primary"));
}

async function sessionsSection() {
  const listed = await get("/dashboard/sessions");
  return h("section.card", h("h2", "Where you are signed in"),
    wide(table(["Signed in", "Last seen", "Browser", "Network", ""], listed.data.map((s) => h("tr",
      h("td.nowrap", ago(s.created_at)), h("td.nowrap", ago(s.last_seen_at)), h("td", s.user_agent || "—"), h("td", s.client || "—"),
      h("td.actions", s.current ? badge("this session")
        : action("Sign out", async () => { await del(`/dashboard/sessions/${s.id}`); route(); })))))),
    listed.data.length > 1 ? action("Sign out everywhere else", async () => {
      await post("/dashboard/sessions/sign-out-others");
      route();
    }) : null);
}

async function securityPage() {
  const me = session.me;
  const required = me.two_factor_enrolment_required;
  return shell("#/security", h("h1", "Security"),
    required ? h("p.error", { role: "alert" },
      "This account requires two-factor sign-in: set it up to go on.") : null,
    await twoFactorSection("/dashboard"),
    !required && me.role === "owner" ? await requirementSection() : null,
    required ? null : await sessionsSection());
}

export const nav = ["#/security", "Security"];
export const routes = [[/^#\/security$/, securityPage]];
