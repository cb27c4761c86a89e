// A list page's state in the hash: its filters and at most one cursor, as the API pages its lists
// (newest first; ``after``: older than that id, ``before``: newer), so that a page of a list can
// be shared and Back returns to the one before (#/broadcasts?after=…, #/suppressions?origin=…).
// No DOM here (tests/web/ runs it under node); emailfilter.js is the e-mails list's richer filter.

const ID = /^[0-9a-f-]{1,64}$/i;

/** The state a hash's query says for a list filtered by ``names`` (each a short text): a cursor
 *  that is not an id is left out, and ``before`` when ``after`` is there. */
export function listState(query, names = []) {
  const params = new URLSearchParams(query || "");
  const state = { after: "", before: "" };
  for (const name of names) state[name] = (params.get(name) || "").trim().slice(0, 320);
  const after = params.get("after") || "", before = params.get("before") || "";
  if (ID.test(after)) state.after = after;
  else if (ID.test(before)) state.before = before;
  return state;
}

/** The hash of ``state`` on the list at ``base`` ("#/broadcasts"): its filters in their order,
 *  then its cursor; nothing empty. */
export function listHash(base, state) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(state)) {
    if (name !== "after" && name !== "before" && value) params.set(name, value);
  }
  if (state.after) params.set("after", state.after);
  else if (state.before) params.set("before", state.before);
  const shown = params.toString();
  return shown ? `${base}?${shown}` : base;
}

/** The API's query for ``state``'s page of ``limit`` items; ``rename`` maps a filter to the
 *  API's name of it ({segment: "segment_id"}). */
export function apiQuery(state, limit, rename = {}) {
  const params = new URLSearchParams({ limit: String(limit) });
  for (const [name, value] of Object.entries(state)) {
    if (name !== "after" && name !== "before" && value) params.set(rename[name] || name, value);
  }
  if (state.after) params.set("after", state.after);
  else if (state.before) params.set("before", state.before);
  return params.toString();
}

/** The hashes of the newer and older pages around a page of ``items`` (newest first, each with
 *  ``key``) read with ``state`` (``more``: the API's has_more in the direction read), each null
 *  where there is no such page. */
export function pagesOf(base, state, items, more, key = "id") {
  if (!items.length) return { newer: null, older: null };
  const filters = { ...state, after: "", before: "" };
  const older = state.before || more ? listHash(base, { ...filters, after: items[items.length - 1][key] }) : null;
  const newer = state.after || (state.before && more) ? listHash(base, { ...filters, before: items[0][key] }) : null;
  return { newer, older };
}
