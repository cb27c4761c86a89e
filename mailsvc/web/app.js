// The dashboard: a small client of /auth, /me and /dashboard/* with hash routes (#/emails).
// No framework, no build step, nothing from another origin (docs/decisions.md, "Web UI").
// Each page is a module of pages/; this list is the navigation's order (a new page: its module
// here, exporting ``nav`` and ``routes``; see ui.js).

import * as activity from "/ui/pages/activity.js";
import * as apiKeys from "/ui/pages/apikeys.js";
import * as broadcasts from "/ui/pages/broadcasts.js";
import * as builder from "/ui/pages/builder.js";
import * as contacts from "/ui/pages/contacts.js";
import * as domains from "/ui/pages/domains.js";
import * as email from "/ui/pages/email.js";
import * as emails from "/ui/pages/emails.js";
import * as inbox from "/ui/pages/inbox.js";
import * as overview from "/ui/pages/overview.js";
import * as security from "/ui/pages/security.js";
import * as settings from "/ui/pages/settings.js";
import * as signin from "/ui/pages/signin.js";
import * as suppressions from "/ui/pages/suppressions.js";
import * as templates from "/ui/pages/templates.js";
import * as webhooks from "/ui/pages/webhooks.js";
import { start } from "/ui/ui.js";

start([signin, overview, emails, email, inbox, domains, apiKeys, webhooks, suppressions, contacts, templates, builder, broadcasts, activity, settings, security], {
  // An account that requires two-factor sign-in: a member without it sets it up first.
  mustEnrol: (me) => me.two_factor_enrolment_required, enrolAt: "#/security",
});
