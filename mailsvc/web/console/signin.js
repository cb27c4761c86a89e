// An operator signs in, or chooses a password from a link (`mailsvc operators create`).

import { post } from "/ui/console/api.js";
import { form, input, signedIn } from "/ui/console/frame.js";
import { field, h } from "/ui/dom.js";

function loginPage() {
  return h("main.center", { id: "main", tabindex: "-1" },
    h("section.card.narrow",
      h("h1", "Operator sign-in"),
      form(async (data) => {
        signedIn(await post("/console/auth/login", { email: data.get("email"), password: data.get("password") }));
        location.hash = "#/";
      },
      field("E-mail address", input("email", { type: "email", autocomplete: "username", required: true })),
      field("Password", input("password", { type: "password", autocomplete: "current-password", required: true })),
      h("button.primary", { type: "submit" }, "Sign in"))));
}

function setPasswordPage(token) {
  return h("main.center", { id: "main", tabindex: "-1" },
    h("section.card.narrow",
      h("h1", "Choose your operator password"),
      form(async (data) => {
        if (data.get("password") !== data.get("again")) throw new Error("The two passwords differ.");
        signedIn(await post("/console/auth/password", { token, password: data.get("password") }));
        location.replace("#/");
      },
      field("New password", input("password", { type: "password", autocomplete: "new-password", required: true, minlength: 10 }),
        "At least 10 characters."),
      field("Repeat it", input("again", { type: "password", autocomplete: "new-password", required: true })),
      h("button.primary", { type: "submit" }, "Set password and sign in"))));
}

export const openRoutes = [
  [/^#\/set-password\/([\w-]+)$/, (m) => setPasswordPage(m[1])],
  [/^#\/login$/, () => loginPage()],
];
