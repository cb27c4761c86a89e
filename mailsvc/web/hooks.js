// What a webhook's page tells of its deliveries: an attempt's outcome in words (from its HTTP
// status, or the dispatcher's reason when there was none: timeout, refused, TLS, DNS…), the
// payload as sent laid out to read, and the endpoint's success over the last 24 hours. No DOM
// here (tests/web/ runs it under node).

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
