// The operator console (docs/decisions.md, "Operator console"): the dashboard's frame, client and
// style (/ui/ui.js, /ui/api.js) with the console's pages and session paths (the mailsvc_operator
// cookie), never the dashboard's. This list is the navigation's order.

import * as audit from "/ui/console/audit.js";
import * as queue from "/ui/console/queue.js";
import * as security from "/ui/console/security.js";
import * as signin from "/ui/console/signin.js";
import * as tenants from "/ui/console/tenants.js";
import * as waitlist from "/ui/console/waitlist.js";
import { start } from "/ui/ui.js";

start([signin, tenants, queue, audit, waitlist, security], {
  me: "/console/me",
  logout: "/console/auth/logout",
  brand: "mailsvc operator",
  who: (me) => `${me.name} · ${me.email}`,
});
