// What a webhook's page tells of its deliveries: an attempt's outcome in words (from its HTTP
// status, or the dispatcher's reason when there was none: timeout, refused, TLS, DNS…), the
// payload as sent laid out to read, and the endpoint's success over the last 24 hours. No DOM
// here (tests/web/ runs it under node).

import { ATTEMPT_ERRORS } from "./words.js";

// The dispatcher's reasons ("<reason>: <message>", mailsvc/outside/fetch.py) in words.
const REASONS = [
  [/^connect: could not connect: ConnectionRefusedError/, "refused: nothing listens at the endpoint's port"],
  [/^connect:/, "could not connect"],
  [/^timeout:/, "timeout: the endpoint did not answer in time"],
  [/^tls:/, "TLS: the handshake or the certificate check failed"],
  [/^dns:/, "DNS: the endpoint's name did not resolve"],
  [/^redirect:/, "redirect: the endpoint redirected, and redirects are not followed"],
  [/^too_large:/, "the response was too large"],
  [/^connection:/, "the connection failed"],
];

/** An attempt's outcome in words, or null for a success (2xx) or no attempt yet. */
export function attemptError(status, response) {
  if (status !== null && status !== undefined) {
    if (status >= 200 && status < 300) return null;
    if (status >= 500) return `5xx: the endpoint failed (HTTP ${status})`;
    if (status >= 400) return `4xx: the endpoint refused the event (HTTP ${status})`;
    return `HTTP ${status}: not a success`;
  }
  const said = String(response || "");
  if (!said) return null;
  // Refused before any request (a private address, a malformed URL): the reason says which.
  if (said.startsWith("refused: ")) return `refused here, not sent: ${said.slice(9)}`;
  const found = REASONS.find(([pattern]) => pattern.test(said));
  return found ? found[1] : said;
}

/** The payload as sent, indented to read (as it came when it is not JSON). */
export function pretty(payload) {
  try { return JSON.stringify(JSON.parse(payload), null, 2); } catch { return String(payload ?? ""); }
}

/** The last 24 hours' success in words: "80 % (4 of 5 deliveries)", or a line when none was made. */
export function successText(day) {
  if (!day || !day.attempted) return "No delivery attempted in the last 24 hours.";
  const rate = Math.round((100 * day.delivered) / day.attempted);
  return `${rate} % delivered (${day.delivered} of ${day.attempted} ${day.attempted === 1 ? "delivery" : "deliveries"})`;
}

/** One kept attempt's failure in words (its ``error`` kind, with the HTTP status after an
 *  answer's), or null for a success. */
export function attemptWords(attempt) {
  if (!attempt || !attempt.error) return null;
  const words = Object.hasOwn(ATTEMPT_ERRORS, attempt.error) ? ATTEMPT_ERRORS[attempt.error]
    : String(attempt.error).replace(/_/g, " ");
  return attempt.status !== null && attempt.status !== undefined ? `${words} (HTTP ${attempt.status})` : words;
}

/** How long an attempt took: "85 ms", "1.2 s", "15 s". */
export function durationText(ms) {
  const value = Number(ms) || 0;
  if (value < 1000) return `${Math.round(value)} ms`;
  return value < 10000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value / 1000)} s`;
}

/** The last 24 hours' attempts: "75 % of attempts succeeded (3 of 4)", or a line when none was made. */
export function attemptRateText(day) {
  if (!day || !day.made) return "No attempt in the last 24 hours.";
  const rate = Math.round((100 * day.succeeded) / day.made);
  return `${rate} % of attempts succeeded (${day.succeeded} of ${day.made})`;
}

/** Whether "Retry now" is offered for a delivery of a webhook in ``status``: one pending or
 *  failed, no attempt of it in flight, its webhook enabled (a disabled one receives nothing). */
export function retryable(delivery, status) {
  return status === "enabled" && !delivery.in_flight && (delivery.state === "pending" || delivery.state === "failed");
}
