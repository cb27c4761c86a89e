// The operator console's client of /console/*: its own cookie goes by itself (HttpOnly); its
// CSRF token, handed over at sign-in and by GET /console/me, goes in a header on every change.
// The operator API's copies answer the native envelope ({error: {code, message}}), the
// console's sign-in the dashboard's ({name, message}): both are read.

export class ApiError extends Error {
  constructor(status, body) {
    const inner = body && body.error && typeof body.error === "object" ? body.error : body;
    super((inner && inner.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (inner && (inner.code || inner.name)) || "error";
  }
}

export const session = { csrf: null, me: null };

/** The operator API's path as the console reaches it ("/admin/v1/queue" → "/console/admin/v1/queue"). */
export function admin(path) { return `/console/admin/v1${path}`; }

export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = session.csrf || "";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, credentials: "same-origin", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);
export const patch = (path, body) => call("PATCH", path, body);
