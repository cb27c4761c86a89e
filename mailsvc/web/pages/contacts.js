// Contacts and segments: search and paging, a CSV import, one contact's details and segments.

import { ApiError, del, get, patch, post } from "/ui/api.js";
import { batches, contactsOf, rowMessage } from "/ui/csv.js";
import { ago, badge, clip, copyButton, copyable, field, h, table } from "/ui/dom.js";
import { apiQuery, listHash, listState, pagesOf } from "/ui/listing.js";
import { action, form, heading, input, opener, pager, route, select, shell, toLogin, wide } from "/ui/ui.js";

const CONTACTS_PAGE = 50;
const FILTERS = ["q", "segment"];

function contactsHash(params) {
  return listHash("#/contacts", params);
}

function fullName(c) {
  return [c.first_name, c.last_name].filter(Boolean).join(" ") || "—";
}

function segmentOptions(segments, none) {
  return [["", none], ...segments.map((s) => [s.id, s.name])];
}

async function contactsPage(query) {
  const state = listState(query, FILTERS);
  const { q, segment } = state;
  const args = apiQuery(state, CONTACTS_PAGE, { segment: "segment_id" });
  const [list, segments] = await Promise.all([get(`/dashboard/contacts?${args}`), get("/dashboard/segments")]);
  const segmentsList = segments.data;
  const caption = q || segment ? (n, more) => `Contacts matching the search (${n}${more ? "+" : ""})` : () => null;
  const listed = h("div", contactsTable(list.data, caption(list.data.length, list.has_more)));
  // After an import the first page is read again, so that the new contacts show at once.
  const refresh = async () => {
    const again = await get(`/dashboard/contacts?${apiQuery({ q, segment }, CONTACTS_PAGE, { segment: "segment_id" })}`);
    listed.replaceChildren(contactsTable(again.data, caption(again.data.length, again.has_more)));
  };
  const filter = select("segment", segmentOptions(segmentsList, "All contacts"), segment);
  const search = form(async (data) => {
    location.hash = contactsHash({ q: String(data.get("q") || "").trim(), segment: data.get("segment") });
  }, h("div.inline", field("Search address, first or last name", input("q", { type: "search", value: q, maxlength: 320 }),
    "The beginning of an address or a name."),
  field("Segment", filter), h("button.primary", { type: "submit" }, "Search")));
  const card = h("section.card", h("h2", "Add a contact"), form(async (data) => {
    const body = { email: data.get("email"), unsubscribed: data.get("unsubscribed") === "on" };
    for (const name of ["first_name", "last_name"]) if (data.get(name)) body[name] = data.get(name);
    const made = await post("/dashboard/contacts", body);
    location.hash = `#/contacts/${made.id}`;
  }, h("div.inline",
    field("E-mail address", input("email", { type: "email", required: true })),
    field("First name", input("first_name", { maxlength: 200 })),
    field("Last name", input("last_name", { maxlength: 200 }))),
  h("p", h("label.check", h("input", { type: "checkbox", name: "unsubscribed" }), "Unsubscribed")),
  h("button.primary", { type: "submit" }, "Add contact")));
  const empty = !q && !segment && !state.after && !state.before && !list.data.length;
  const newSegment = segmentForm();
  return shell("#/contacts", heading("Contacts and segments", opener("New contact", card, empty),
    opener("New segment", newSegment, !segmentsList.length)), card,
    h("section#contact-list.card", h("h2", "Contacts"), search, listed,
      pager("Pages of contacts", pagesOf("#/contacts", state, list.data, list.has_more))),
    importCard(segmentsList, refresh),
    segmentsCard(segmentsList, newSegment));
}

function contactsTable(items, caption) {
  return wide(table(["Address", "Name", "Status", "Created"], items.map((c) => h("tr",
    h("td.nowrap", h("a.clip", { href: `#/contacts/${c.id}`, title: c.email }, c.email), " ", copyButton(c.email, "Copy address")),
    h("td", fullName(c)),
    h("td", badge(c.unsubscribed ? "unsubscribed" : "subscribed")), h("td.nowrap", ago(c.created_at)))), caption,
  caption ? "No contact matches." : "No contact yet: add one below or import a CSV file."));
}

/** The form of a new segment, hidden behind the page's "New segment" until asked for. */
function segmentForm() {
  return h("div#new-segment", form(async (data) => {
    await post("/dashboard/segments", { name: data.get("name") });
    route();
  }, h("div.inline", field("New segment name", input("name", { required: true, maxlength: 256 })),
    h("button.primary", { type: "submit" }, "Create segment"))));
}

function segmentsCard(segments, newSegment) {
  return h("section#segments.card", h("h2", "Segments"), newSegment,
    wide(table(["Name", "Created", ""], segments.map((s) => {
      const name = input("name", { value: s.name, maxlength: 256, "aria-label": `New name for segment ${s.name}` });
      return h("tr", h("td", name), h("td.nowrap", ago(s.created_at)),
        h("td.actions.nowrap",
          h("a", { href: contactsHash({ segment: s.id }), "aria-label": `Members of ${s.name}` }, "Members"),
          action("Rename", async () => { await patch(`/dashboard/segments/${s.id}`, { name: name.value }); route(); }),
          action("Delete", async () => {
            await del(`/dashboard/segments/${s.id}`);
            // A list filtered on the segment just deleted has nothing left to show.
            if (location.hash.includes(s.id)) location.hash = "#/contacts"; else route();
          }, "danger small")));
    }), "Segments (deleting one keeps its contacts)", "No segment yet: a segment is a list of contacts a broadcast goes to (New segment).")));
}

function importCard(segments, refresh) {
  const file = h("input", { type: "file", name: "file", accept: ".csv,text/csv", required: true });
  const progress = h("progress", { max: 1, value: 0, hidden: true, "aria-label": "Import progress" });
  const counter = h("p.muted", { role: "status", "aria-live": "polite" });
  const problems = h("div#import-errors", { id: "import-errors" });
  return h("section.card", h("h2", "Import a CSV file"),
    h("p.muted", "A header row, then one contact a line. Columns: email (required), first_name, last_name, unsubscribed "
      + "(true or false), and any other column as a property: name it key:number or key:boolean for those types, "
      + "else it is text. Empty cells set nothing. Up to 1,000 rows go in each call."),
    form(async (data) => {
      problems.replaceChildren();
      const chosen = file.files[0];
      if (!chosen) throw new Error("Choose a file.");
      const parsed = contactsOf(await chosen.text());
      const total = parsed.rows.length + parsed.errors.length;
      const failed = [...parsed.errors];
      let saved = 0, done = parsed.errors.length;
      progress.hidden = false;
      progress.max = Math.max(total, 1);
      const show = () => {
        progress.value = done;
        counter.textContent = `${done.toLocaleString()} of ${total.toLocaleString()} rows: ${saved.toLocaleString()} saved, `
          + `${failed.length.toLocaleString()} refused.`;
      };
      show();
      const segment = data.get("segment");
      let stopped = null;
      for (const chunk of batches(parsed.rows)) {
        let reply;
        try {
          reply = await post("/dashboard/contacts/batch", { contacts: chunk.map((r) => r.contact), ...(segment ? { segment_id: segment } : {}) });
        } catch (error) {
          if (error instanceof ApiError && error.status === 401) return toLogin();
          stopped = { line: chunk[0].line, error };
          break;
        }
        saved += reply.data.length;
        for (const e of reply.errors) {
          const row = chunk[e.index];
          failed.push({ line: row ? row.line : null, email: row ? row.email : "", message: rowMessage(e.message) });
        }
        done += chunk.length;
        show();
      }
      failed.sort((a, b) => a.line - b.line);
      problems.replaceChildren(importErrors(failed));
      if (saved) await refresh().catch(() => {});
      if (stopped) {
        return h("p.error", { role: "alert" },
          `The import stopped at line ${stopped.line}: ${stopped.error.message}. The lines before it were sent.`);
      }
      return h("p.ok", `Import finished: ${saved.toLocaleString()} rows saved, ${failed.length.toLocaleString()} refused.`);
    }, h("div.inline", field("CSV file", file),
      field("Add them to a segment", select("segment", segmentOptions(segments, "No segment"), "")),
      h("button.primary", { type: "submit" }, "Import"))),
    progress, counter, problems);
}

function importErrors(failed) {
  if (!failed.length) return null;
  const shown = failed.slice(0, 500);
  return h("div",
    wide(table(["Line", "Address", "Error"], shown.map((e) => h("tr",
      h("td.nowrap", e.line === null ? "?" : String(e.line)), h("td", e.email ? clip(e.email) : "—"), h("td", e.message))),
    `Rows refused (${failed.length.toLocaleString()})`)),
    failed.length > shown.length ? h("p.muted", `And ${(failed.length - shown.length).toLocaleString()} more.`) : null);
}

function propertyInput(key, prop) {
  const label = `Value of ${key}`;
  if (prop.type === "boolean") {
    const node = select(`prop:${key}`, [["true", "true"], ["false", "false"]], String(prop.value));
    node.setAttribute("aria-label", label);
    return node;
  }
  return input(`prop:${key}`, { type: prop.type === "number" ? "number" : "text", step: prop.type === "number" ? "any" : null,
    value: String(prop.value), "aria-label": label });
}

function typedValue(type, raw) {
  if (type === "number") {
    const value = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(value)) throw new Error(`"${raw}" is not a number.`);
    return value;
  }
  if (type === "boolean") return raw === "true";
  return raw;
}

async function contactPage(id) {
  const path = `/dashboard/contacts/${encodeURIComponent(id)}`;
  const [contact, member, segments] = await Promise.all([get(path), get(`${path}/segments`), get("/dashboard/segments")]);
  const props = Object.entries(contact.properties || {});
  const memberIds = new Set(member.data.map((s) => s.id));
  const others = segments.data.filter((s) => !memberIds.has(s.id));
  const joinSelect = select("segment", others.map((s) => [s.id, s.name]), "");
  return shell("#/contacts",
    h("p", h("a", { href: "#/contacts" }, "← All contacts")),
    h("h1.clip", { title: contact.email }, contact.email), h("p", copyable(contact.id, "Copy id")),
    h("section.card", h("h2", "Details"), form(async (data) => {
      const body = {
        first_name: String(data.get("first_name")).trim() || null,
        last_name: String(data.get("last_name")).trim() || null,
      };
      // Only a change is sent: saving a name never touches the suppression list.
      if ((data.get("unsubscribed") === "on") !== contact.unsubscribed) body.unsubscribed = !contact.unsubscribed;
      const properties = {};
      for (const [key, prop] of props) {
        if (data.get(`drop:${key}`) === "on") properties[key] = null;
        else properties[key] = typedValue(prop.type, String(data.get(`prop:${key}`)));
      }
      const newKey = String(data.get("new_key") || "").trim();
      if (newKey) properties[newKey] = typedValue(data.get("new_type"), String(data.get("new_value") || ""));
      if (Object.keys(properties).length) body.properties = properties;
      await patch(path, body);
      route();
    },
    h("div.inline",
      field("First name", input("first_name", { value: contact.first_name || "", maxlength: 200 })),
      field("Last name", input("last_name", { value: contact.last_name || "", maxlength: 200 }))),
    h("p", h("label.check", h("input", { type: "checkbox", name: "unsubscribed", checked: contact.unsubscribed }),
      "Unsubscribed (on the suppression list)")),
    table(["Property", "Type", "Value", "Remove"], props.map(([key, prop]) => h("tr",
      h("td", h("code", key)), h("td", prop.type), h("td", propertyInput(key, prop)),
      h("td", h("input", { type: "checkbox", name: `drop:${key}`, "aria-label": `Remove ${key}` })))), "Properties"),
    h("fieldset.events", h("legend", "Add a property"),
      field("Name", input("new_key", { pattern: "[A-Za-z_][A-Za-z0-9_]{0,49}", maxlength: 50 })),
      field("Type", select("new_type", [["string", "Text"], ["number", "Number"], ["boolean", "Boolean (true/false)"]], "string")),
      field("Value", input("new_value"))),
    h("p.muted", "A property keeps the type of the first value the account gave it."),
    h("button.primary", { type: "submit" }, "Save"))),
    h("section.card", h("h2", "Segments"),
      table(["Segment", ""], member.data.map((s) => h("tr",
        h("td", h("a", { href: contactsHash({ segment: s.id }) }, s.name)),
        h("td", action(`Remove from ${s.name}`, async () => { await del(`${path}/segments/${s.id}`); route(); }))))),
      others.length ? h("div.inline.spaced", field("Add to segment", joinSelect),
        action("Add", async () => { await post(`${path}/segments/${joinSelect.value}`); route(); }, "primary"))
        : h("p.muted", segments.data.length ? "In every segment." : "No segments yet: create one on the contacts page.")),
    h("section.card", h("h2", "Delete"), h("p.muted", "Its suppression record, if any, stays."),
      action(`Delete ${contact.email}`, async () => { await del(path); location.hash = "#/contacts"; }, "danger small")));
}

export const nav = ["#/contacts", "Contacts"];
export const routes = [
  [/^#\/contacts\/([\w-]+)$/, (m) => contactPage(m[1])],
  [/^#\/contacts(?:\?(.*))?$/, (m) => contactsPage(m[1] || "")],
];
