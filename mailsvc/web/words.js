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
