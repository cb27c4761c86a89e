// An operator's two-factor sign-in: the dashboard's section (pages/security.js) on the console's paths.

import { h } from "/ui/dom.js";
import { twoFactorSection } from "/ui/pages/security.js";
import { shell } from "/ui/ui.js";

async function securityPage() {
  return shell("#/security", h("h1", "Security"), await twoFactorSection("/console"));
}

export const nav = ["#/security", "Security"];
export const routes = [[/^#\/security$/, securityPage]];
