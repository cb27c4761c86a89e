// Signing in, and choosing a password from a link (the first user's, an invitation's, a reset's);
// the operator console's pages are the same with its own titles and paths (``signInRoutes``).

import { post } from "/ui/api.js";
import { field, h } from "/ui/dom.js";
import { form, input, signedIn } from "/ui/ui.js";
// Two-factor sign-in: a reply that is a challenge goes on to its second step (security.js).
import { secondStep } from "/ui/pages/security.js";

function challenged(reply, login) {
  if (reply.object !== "two_factor_challenge") return false;
  secondStep(reply, `${login}/two-factor`);
  return true;
}

function loginPage(title, path) {
  return h("main.center", { id: "main", tabindex: "-1" },
    h("section.card.narrow",
      h("h1", title),
      form(async (data) => {
        const reply = await post(path, { email: data.get("email"), password: data.get("password") });
        if (challenged(reply, path)) return;
        signedIn(reply);
        location.hash = "#/";
      },
      field("E-mail address", input("email", { type: "email", autocomplete: "username", required: true })),
      field("Password", input("password", { type: "password", autocomplete: "current-password", required: true })),
      h("button.primary", { type: "submit" }, "Sign in"))));
}

function setPasswordPage(title, path, token, login) {
  return h("main.center", { id: "main", tabindex: "-1" },
    h("section.card.narrow",
      h("h1", title),
      form(async (data) => {
        if (data.get("password") !== data.get("again")) throw new Error("The two passwords differ.");
        const reply = await post(path, { token, password: data.get("password") });
        if (challenged(reply, login)) return;
        signedIn(reply);
        location.replace("#/");
      },
      field("New password", input("password", { type: "password", autocomplete: "new-password", required: true, minlength: 10 }),
        "At least 10 characters."),
      field("Repeat it", input("again", { type: "password", autocomplete: "new-password", required: true })),
      h("button.primary", { type: "submit" }, "Set password and sign in"))));
}

/** The open routes (no session needed) of a site's sign-in and set-password pages. */
export function signInRoutes({ signInTitle, passwordTitle, login, password }) {
  return [
    [/^#\/set-password\/([\w-]+)$/, (m) => setPasswordPage(passwordTitle, password, m[1], login)],
    [/^#\/login$/, () => loginPage(signInTitle, login)],
  ];
}

export const openRoutes = signInRoutes({
  signInTitle: "Sign in to mailsvc", passwordTitle: "Choose your password", login: "/auth/login",
  password: "/auth/password",
});
