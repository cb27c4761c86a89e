// The e-mails list's filter and the URL: a status, a text (subject, sender, recipient or id), a
// range of days (from, to: the reader's local days, both included), a sending domain and a cursor
// (after: older than that id, before: newer), kept in the hash (#/emails?status=bounced&q=ann)
// so that a filtered list can be shared and Back returns to the one before. No DOM here
// (tests/web/ runs it under node).

/** The status chips, in order: the code the list is filtered by ("" for every e-mail) and its words. */
export const STATUSES = [
  ["", "all"], ["delivered", "delivered"], ["bounced", "bounced"], ["complained", "complained"], ["failed", "failed"],
  ["delivery_delayed", "delivery delayed"], ["scheduled", "scheduled"], ["suppressed", "suppressed"],
];
const KNOWN = new Set(STATUSES.map(([code]) => code));
const ID = /^[0-9a-f-]{1,64}$/i;
const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DOMAIN = /^[a-z0-9.-]{1,253}$/i;

function day(value) {
  return DAY.test(value) && !Number.isNaN(new Date(`${value}T00:00`).getTime()) ? value : "";
}

/** The filter a hash's query says ("status=bounced&q=ann&from=2026-12-01&after=…"): a status it
 *  does not know, a day that is not one, a domain that is not a name, a cursor that is not an id,
 *  and both cursors together are left out. */
export function parse(query) {
  const params = new URLSearchParams(query || "");
  const status = params.get("status") || "";
  const domain = (params.get("domain") || "").trim().toLowerCase();
  const filter = { status: KNOWN.has(status) ? status : "", q: (params.get("q") || "").trim(),
    from: day(params.get("from") || ""), to: day(params.get("to") || ""), domain: DOMAIN.test(domain) ? domain : "",
    after: "", before: "" };
  const after = params.get("after") || "", before = params.get("before") || "";
  if (after && ID.test(after)) filter.after = after;
  else if (before && ID.test(before)) filter.before = before;
  return filter;
}

function query(filter) {
  const params = new URLSearchParams();
  if (filter.status) params.set("status", filter.status);
  if (filter.q) params.set("q", filter.q);
  for (const name of ["from", "to", "domain"]) if (filter[name]) params.set(name, filter[name]);
  if (filter.after) params.set("after", filter.after);
  else if (filter.before) params.set("before", filter.before);
  return params.toString();
}

/** The hash of ``filter`` (the first page of every e-mail: "#/emails"). */
export function toHash(filter) {
  const shown = query(filter);
  return shown ? `#/emails?${shown}` : "#/emails";
}

/** The instant a local day begins (``next``: the day after it), as ISO 8601 in UTC. */
export function dayStart(value, next = false) {
  const start = new Date(`${value}T00:00`);
  if (next) start.setDate(start.getDate() + 1);
  return start.toISOString();
}

/** Whether ``filter`` narrows the list (anything but a cursor). */
export function narrowed(filter) {
  return Boolean(filter.status || filter.q || filter.from || filter.to || filter.domain);
}

/** The dashboard's request for ``filter``'s page of ``limit`` e-mails: its days as the instants
 *  they begin and end where the reader is (``since``, ``until``). */
export function apiPath(filter, limit) {
  const params = new URLSearchParams();
  if (filter.status) params.set("status", filter.status);
  if (filter.q) params.set("q", filter.q);
  if (filter.from) params.set("since", dayStart(filter.from));
  if (filter.to) params.set("until", dayStart(filter.to, true));
  if (filter.domain) params.set("domain", filter.domain);
  params.set("limit", String(limit));
  if (filter.after) params.set("after", filter.after);
  else if (filter.before) params.set("before", filter.before);
  return `/dashboard/search/emails?${params}`;
}

/** The same filter on another page (a cursor), or changed (its first page). */
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
