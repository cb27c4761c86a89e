// Errors told in words, with their code after them: "The sending domain is not verified
// (domain_not_verified)", never a bare code. No DOM here (tests/web/ runs it under node).

/** What each reason a broadcast (or a refusal) may carry means. */
export const REASONS = {
  domain_not_verified: "The sending domain is not verified",
  segment_deleted: "The segment was deleted while it was being sent",
  tenant_suspended: "The account is suspended",
  tenant_paused: "The account is paused",
  plan_limit: "The plan's limit is reached",
  plan_required: "This needs a higher plan",
  insufficient_scope: "This needs a full-access key",
  owner_required: "Only an owner of the account may do this",
  rate_limit_exceeded: "Too many requests; wait a moment and try again",
  not_found: "It does not exist (any more)",
};

/** A stored reason code as a sentence with the code after it. */
export function reasonText(code) {
  if (!code) return "Unknown reason";
  return `${REASONS[code] || "It stopped"} (${code})`;
}

/** An error's message as a sentence with its code after it (no code: the message alone). */
export function errorText(message, code) {
  const said = String(message || "").trim().replace(/[.\s]+$/, "");
  const words = said || (code && REASONS[code]) || "Something went wrong";
  return code ? `${words} (${code})` : `${words}.`;
}

/** What a state, status, origin or outcome code shown in a badge is, in words (lower case, as a
 *  badge reads); the code itself goes in the badge's title. A code not listed reads as itself
 *  with its underscores as spaces. */
export const STATES = {
  // An e-mail's last event, a delivery's status.
  queued: "queued", scheduled: "scheduled", canceled: "canceled", suppressed: "suppressed", sent: "sent",
  delivery_delayed: "delivery delayed", delivered: "delivered", bounced: "bounced", complained: "complained",
  failed: "failed", deferred: "retrying", opened: "opened", clicked: "clicked",
  // A suppression's origin.
  hard_bounce: "hard bounce", complaint: "complaint", unsubscribe: "unsubscribed", manual: "added by hand",
  // A queued delivery's state (the operator's queue).
  due: "due", in_flight: "being sent", held: "held",
  // A domain and its records.
  not_started: "not started", pending: "pending", verified: "verified", temporary_failure: "temporary failure",
  temporary: "temporary failure", match: "matches", mismatch: "does not match", missing: "missing",
  // Webhooks, users, templates, broadcasts.
  enabled: "enabled", disabled: "disabled", invited: "invited", active: "active", draft: "draft",
  published: "published", sending: "sending", partially_sent: "partly sent",
  // The inbox's outcomes and checks.
  captured: "captured", simulated: "simulated", oneclick: "one-click", "one-click": "one-click",
  softfail: "soft fail", permerror: "permanent error", temperror: "temporary error",
};

/** A code's words for a badge (see STATES). */
export function stateText(code) {
  const key = String(code ?? "");
  if (!key) return "—";
  return Object.hasOwn(STATES, key) ? STATES[key] : key.replace(/_/g, " ");
}

/** What went wrong in one attempt of a webhook delivery (mailsvc/domain/webhooks.py,
 *  ATTEMPT_ERRORS), in words; hooks.js adds the HTTP status where there was one. */
export const ATTEMPT_ERRORS = {
  timeout: "Timeout: the endpoint did not answer in time",
  refused: "Connection refused: nothing listens at the endpoint's port",
  connect: "Could not connect to the endpoint",
  tls: "TLS: the handshake or the certificate check failed",
  dns: "DNS: the endpoint's name did not resolve",
  connection: "The connection failed before a complete answer",
  too_large: "The answer was too large to read",
  redirect: "The endpoint redirected, and redirects are not followed",
  blocked: "Not sent: the endpoint's address is not a public one",
  http_4xx: "4xx: the endpoint refused the event",
  http_5xx: "5xx: the endpoint failed",
  http_other: "The answer was not a success",
  internal: "Not sent: an error on this service's side",
};
