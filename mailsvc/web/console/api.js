// The operator API's paths as the console reaches them; the client is the dashboard's
// (/ui/api.js), with the console's own session in the page that loads it.

export { get, patch, post } from "/ui/api.js";

/** "/admin/v1/queue" → "/console/admin/v1/queue". */
export function admin(path) { return `/console/admin/v1${path}`; }
