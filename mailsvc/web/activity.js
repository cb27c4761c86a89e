// The account's activity in words: each entry of GET /dashboard/activity as a sentence ("ana@acme.test
// revoked the key 'ci'"), its raw code (action and detail) for a tooltip, and the kinds the page is
// filtered by. No DOM here (tests/web/ runs it under node). An action this module does not know
// (a newer writer's) is told plainly: who, then its code.

/** The kinds of action the list is filtered by (the API's ``kind``), in the menu's order. */
export const KINDS = [["", "All actions"], ["api_keys", "API keys"], ["domains", "Domains"], ["members", "Members"],
  ["sign_ins", "Sign-ins"], ["webhooks", "Webhooks"], ["account", "The account"]];

/** Who acted, in words: a member's address, an API key by name, an operator, the service. */
export function who(actor) {
  const a = actor || {};
  if (a.type === "user") return a.email || (a.removed ? "A removed member" : "A member");
  if (a.type === "api_key") return a.name ? `The API key '${a.name}'` : "A revoked API key";
  if (a.type === "operator") return a.name && a.name !== "operator" ? `The operator ${a.name}` : "The operator";
  if (a.type === "system") return "mailsvc";
  return "Someone";
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
const quoted = (name) => (name ? `'${name}'` : "(no name)");
const role = (code) => (code === "owner" ? "an owner" : "a member");

/** The sentence of each action known, from who acted and the entry's detail. */
const SENTENCES = {
  "api_key.create": (by, d) => `${by} made the key ${quoted(d.name)}`,
  "api_key.revoke": (by, d) => `${by} revoked the key ${quoted(d.name)}`,
  "domain.create": (by, d) => `${by} added the domain ${d.domain}`,
  "domain.delete": (by, d) => `${by} removed the domain ${d.domain}`,
  "domain.check": (by, d) => `${by} asked for a check of the domain ${d.domain}'s DNS records`,
  "domain.verified": (by, d, system) => (system ? `The domain ${d.domain} was verified` : `${by} verified the domain ${d.domain}`),
  "domain.failed": (by, d) => `The domain ${d.domain} failed verification${d.reason ? `: ${d.reason}` : ""}`,
  "user.link": (by, d) => (d.invited
    ? `${by} invited ${d.email} as ${role(d.role)}`
    : `${by} made a set-password link for ${d.email}`),
  "user.remove": (by, d) => {
    const keys = Array.isArray(d.revoked_keys) ? d.revoked_keys.length : 0;
    return `${by} removed ${d.email} from the account${keys ? ` and revoked ${plural(keys, "key", "keys")} they made` : ""}`;
  },
  "user.sign_in": (by) => `${by} signed in`,
  "user.two_factor_reset": (by, d) => `${by} turned off two-factor sign-in for ${d.email}`,
  "webhook_delivery.retry": webhookRetry,
  "tenant.create": (by, d) => `${by} created the account${d.name ? ` ${quoted(d.name)}` : ""}`,
  "tenant.update": (by, d) => {
    const changed = d.changes && typeof d.changes === "object" ? Object.keys(d.changes) : [];
    return `${by} changed the account's settings${changed.length ? ` (${changed.join(", ")})` : ""}`;
  },
};

/** What a retried delivery had come to before the retry (the detail's ``was`` and ``attempts``). */
function retriedFrom(d) {
  const attempts = Number.isInteger(d.attempts) ? d.attempts : null;
  if (attempts === 0) return " (no attempt had been made yet)";
  const after = attempts === null ? "" : ` after ${plural(attempts, "attempt", "attempts")}`;
  if (d.was === "failed") return ` (it had failed${after})`;
  if (d.was === "pending") return ` (it was still pending${after})`;
  return after ? ` (${after.trim()})` : "";
}

/** A webhook's "retry now" (mailsvc/app/webhooks.py writes its detail: webhook_id, event_id, was, attempts). */
function webhookRetry(by, d) {
  const what = d.event_id ? `the delivery of event ${d.event_id}` : "a webhook delivery";
  const where = d.webhook_id ? ` to webhook ${d.webhook_id}` : "";
  return `${by} retried ${what}${where}${retriedFrom(d)}`;
}

/** An entry as a sentence (no full stop): known actions in words, any other as who and its code. */
export function sentence(entry) {
  const by = who(entry.actor);
  const detail = entry.detail && typeof entry.detail === "object" ? entry.detail : {};
  const action = String(entry.action || "");
  const say = SENTENCES[action];
  if (say) return say(by, detail, (entry.actor || {}).type === "system");
  return `${by}: ${action || "(no action)"}`;
}

/** The entry's raw code, as the audit log keeps it: its action, then its detail as JSON. */
export function rawCode(entry) {
  const detail = entry.detail && Object.keys(entry.detail).length ? ` ${JSON.stringify(entry.detail)}` : "";
  return `${entry.action}${detail}`;
}
