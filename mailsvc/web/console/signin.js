// An operator signs in, or chooses a password from a link (`mailsvc operators create`): the
// dashboard's sign-in pages with the console's titles and paths.

import { signInRoutes } from "/ui/pages/signin.js";

export const openRoutes = signInRoutes({
  signInTitle: "Operator sign-in", passwordTitle: "Choose your operator password", login: "/console/auth/login",
  password: "/console/auth/password",
});
