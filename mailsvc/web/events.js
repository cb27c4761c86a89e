// What an e-mail's page tells of its events: for a bounce, a delay, a failure or a delivery, the
// receiving server's answer in full (its SMTP code, enhanced code and text, as the delivery
// worker recorded them), and a delay's attempt or a failure's reason. No DOM here (tests/web/ runs it under node).

/** The receiving server's answer an event carries, whole ("550 5.1.1 No such user here"), or
 *  null when it carries none (a sent or opened event). */
export function answerOf(data) {
  if (!data || typeof data !== "object") return null;
  if (typeof data.response === "string" && data.response) return data.response;
  const parts = [data.code, data.enhanced_code, data.message].filter((p) => p !== null && p !== undefined && p !== "");
  return parts.length ? parts.map(String).join(" ") : null;
}

/** What else an event says in words: the next attempt of a delay, the reason of a failure. */
export function detailOf(data) {
  if (!data || typeof data !== "object") return null;
  const said = [];
  if (data.attempt) said.push(`attempt ${data.attempt}`);
  if (data.next_attempt_at) said.push(`next attempt ${data.next_attempt_at}`);
  if (data.reason) said.push(String(data.reason).replace(/_/g, " "));
  if (data.remote_host) said.push(`by ${data.remote_host}`);
  return said.length ? said.join(", ") : null;
}
