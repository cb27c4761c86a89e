// The operator console (issue 31 §3; docs/decisions.md, "Operator console"): a small client of
// /console/* with hash routes, on the dashboard's dom.js and style; its own session (the
// mailsvc_operator cookie), never the dashboard's. This list is the navigation's order.

import * as audit from "/ui/console/audit.js";
import { start } from "/ui/console/frame.js";
import * as queue from "/ui/console/queue.js";
import * as signin from "/ui/console/signin.js";
import * as tenants from "/ui/console/tenants.js";
import * as waitlist from "/ui/console/waitlist.js";

start([signin, tenants, queue, audit, waitlist]);
