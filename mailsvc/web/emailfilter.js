// The e-mails list's filter and the URL: a status, a text (subject, sender, recipient or id) and
// a cursor (after: older than that id, before: newer), kept in the hash (#/emails?status=bounced&q=ann)
// so that a filtered list can be shared and Back returns to the one before. No DOM here
// (tests/web/ runs it under node).

/** The status chips, in order: the code the list is filtered by ("" for every e-mail) and its words. */
export const STATUSES = [
  ["", "all"], ["delivered", "delivered"], ["bounced", "bounced"], ["complained", "complained"], ["failed", "failed"],
  ["delivery_delayed", "delivery delayed"], ["scheduled", "scheduled"], ["suppressed", "suppressed"],
];
const KNOWN = new Set(STATUSES.map(([code]) => code));
const ID = /^[0-9a-f-]{1,64}$/i;

/** The filter a hash's query says ("status=bounced&q=ann&after=…"): a status it does not know,
 *  a cursor that is not an id, and both cursors together are left out. */
export function parse(query) {
  const params = new URLSearchParams(query || "");
  const status = params.get("status") || "";
  const filter = { status: KNOWN.has(status) ? status : "", q: (params.get("q") || "").trim(), after: "", before: "" };
  const after = params.get("after") || "", before = params.get("before") || "";
  if (after && ID.test(after)) filter.after = after;
  else if (before && ID.test(before)) filter.before = before;
  return filter;
}

function query(filter, extra = []) {
  const params = new URLSearchParams();
  if (filter.status) params.set("status", filter.status);
  if (filter.q) params.set("q", filter.q);
  for (const [name, value] of extra) params.set(name, value);
  if (filter.after) params.set("after", filter.after);
  else if (filter.before) params.set("before", filter.before);
  return params.toString();
}

/** The hash of ``filter`` (the first page of every e-mail: "#/emails"). */
export function toHash(filter) {
  const shown = query(filter);
  return shown ? `#/emails?${shown}` : "#/emails";
}

/** The dashboard's request for ``filter``'s page of ``limit`` e-mails. */
export function apiPath(filter, limit) {
  return `/dashboard/search/emails?${query(filter, [["limit", String(limit)]])}`;
}

/** The same filter on another page (a cursor), or with another status or text (its first page). */
export function moved(filter, change) {
  return { ...filter, after: "", before: "", ...change };
}

/** The hashes of the newer and older pages of a page of ``items`` (newest first) read with
 *  ``filter`` (``more``: the API's has_more), each null where there is no such page. */
export function pages(filter, items, more) {
  if (!items.length) return { newer: null, older: null };
  const older = filter.before || more ? toHash(moved(filter, { after: items[items.length - 1].id })) : null;
  const newer = filter.after || (filter.before && more) ? toHash(moved(filter, { before: items[0].id })) : null;
  return { newer, older };
}
