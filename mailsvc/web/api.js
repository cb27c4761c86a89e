// The dashboard API client: the session cookie goes by itself (HttpOnly); the CSRF token of
// the session, handed over at sign-in and by GET /me, goes in a header on every change.

export class ApiError extends Error {
  // The main envelope ({name, message}, and the dashboard's code) or the native one ({error:
  // {code, message}}: the operator API's copies the console calls).
  constructor(status, body) {
    const inner = body && body.error && typeof body.error === "object" ? body.error : body;
    super((inner && inner.message) || `HTTP ${status}`);
    this.status = status;
    this.name = (inner && (inner.name || inner.code)) || "error";
    // What the refusal is, where the name alone is too broad (a validation_error that is a
    // domain_not_verified): the dashboard's errors carry the native code beside the name.
    this.code = (inner && inner.code) || this.name;
  }
}

export const session = { csrf: null, me: null };

// A 429 `rate_limit_exceeded` is waited out, not shown: the session shares the account's API
// rate with its keys, and a busy page (the broadcast page reads every second) meets it. Every
// such refusal is decided before the route's handler runs (the account's request rate, the
// per-minute windows of brand imports and DNS set-ups, the sign-in throttle), so the refused
// request changed nothing and sending it again is as safe for a POST, PATCH or DELETE as for a
// GET: no idempotency key is needed. Only short waits are waited out; a longer one (the
// sign-in throttle, a per-minute window) is shown with its message. Other 429s (`ai_*`, the
// sending quotas) are answers to show, not retried.
const RETRIES = 5;
const LONGEST_WAIT_SECONDS = 10;

function pause(ms) { return new Promise((resolve) => { setTimeout(resolve, ms); }); }

export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = session.csrf || "";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const payload = body === undefined ? undefined : JSON.stringify(body);
  for (let attempt = 0; ; attempt += 1) {
    const response = await fetch(path, { method, headers, credentials: "same-origin", cache: "no-store", body: payload });
    const text = await response.text();
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
    if (response.ok) return parsed;
    const wait = Number(response.headers.get("Retry-After"));
    const again = response.status === 429 && parsed && parsed.name === "rate_limit_exceeded"
      && attempt < RETRIES && wait > 0 && wait <= LONGEST_WAIT_SECONDS;
    if (!again) throw new ApiError(response.status, parsed);
    // Retry-After at least, doubling from half a second, with up to half a second of jitter so
    // that the requests refused together do not all come back in the same instant.
    await pause(Math.max(wait * 1000, 500 * 2 ** attempt) + Math.random() * 500);
  }
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);
export const patch = (path, body) => call("PATCH", path, body);
export const del = (path) => call("DELETE", path);
