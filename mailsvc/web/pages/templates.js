// Templates: list, create, edit (HTML code editor, or the visual builder on the top plan), alias,
// variables with types and fallbacks, preview with sample values, publish with a diff of the draft
// against the published version, duplicate, delete, and a test sent to the user's own address.

import { del, get, patch, post, session } from "/ui/api.js";
import { ago, badge, clip, field, h, table } from "/ui/dom.js";
import { apiQuery, listState, pagesOf } from "/ui/listing.js";
import { diffView, previewFrame, spamScoreView } from "/ui/content.js";
import { addressList } from "/ui/autosave.js";
import * as ui from "/ui/ui.js";

export const nav = ["#/templates", "Templates"];
export const routes = [
  [/^#\/templates\/([\w-]+)$/, (m) => templatePage(ui, m[1])],
  [/^#\/templates(?:\?(.*))?$/, (m) => templatesPage(ui, m[1] || "")],
];

const TEMPLATES_PAGE = 50;

async function templatesPage(ui, query) {
  const state = listState(query);
  const [list, caps] = await Promise.all([get(`/dashboard/templates?${apiQuery(state, TEMPLATES_PAGE)}`),
    get("/dashboard/template-builder")]);
  const first = !state.after && !state.before;
  const card = h("section.card", h("h2", "New template"), ui.form(async (data) => {
      const body = { name: data.get("name") };
      if (data.get("alias")) body.alias = data.get("alias");
      body.html = "<p>Hello {{{NAME|there}}}</p>";
      body.variables = [{ key: "NAME", type: "string", fallback_value: "there" }];
      const made = await post("/dashboard/templates", body);
      location.hash = `#/templates/${made.id}`;
    }, h("div.inline", field("Name", ui.input("name", { required: true, maxlength: 256 })),
      field("Alias", ui.input("alias", { pattern: "[A-Za-z0-9][A-Za-z0-9_.\\-]{0,99}" }), "Optional; usable instead of the id"),
      h("button.primary", { type: "submit" }, "Create with HTML")),
    caps.builder ? null : h("p.muted", `The visual builder comes with the ${caps.required_plan} plan.`)));
  return ui.shell("#/templates", ui.heading("Templates", ui.opener("New template", card, first && !list.data.length),
    caps.builder ? h("a.button", { href: "#/builder" }, "Design one in the visual builder") : null), card,
    h("section.card", ui.wide(table(["Name", "Alias", "Status", "Changes", "Updated"], list.data.map((t) => h("tr",
      h("td", h("a.clip", { href: `#/templates/${t.id}`, title: t.name }, t.name)), h("td", t.alias ? clip(t.alias) : "—"),
      h("td", badge(t.status)), h("td", t.has_unpublished_versions ? "unpublished changes" : "—"),
      h("td.nowrap", ago(t.updated_at)))), "Templates",
      first ? "No template yet: create one (New template), then send it by its id or alias." : "No template on this page.")),
    ui.pager("Pages of templates", pagesOf("#/templates", state, list.data, list.has_more))));
}

function variableRow(v = {}) {
  const row = h("div.inline.variable",
    field("Key", h("input", { name: "vkey", value: v.key || "", pattern: "[A-Za-z0-9_]{1,50}", required: true })),
    field("Type", h("select", { name: "vtype" }, ["string", "number"].map((t) => h("option", { value: t, selected: v.type === t }, t)))),
    field("Fallback", h("input", { name: "vfallback", value: v.fallback_value === null || v.fallback_value === undefined ? "" : String(v.fallback_value) })));
  row.append(h("button.secondary.small", { type: "button", onclick: () => {
    const form = row.closest("form");
    row.remove();
    if (form) form.dispatchEvent(new Event("input", { bubbles: true }));
  } }, `Remove variable ${v.key || ""}`.trim()));
  return row;
}

function variablesOf(container) {
  return [...container.querySelectorAll(".variable")].map((row) => {
    const key = row.querySelector("[name=vkey]").value.trim();
    const type = row.querySelector("[name=vtype]").value;
    const raw = row.querySelector("[name=vfallback]").value;
    const fallback = raw === "" ? null : type === "number" ? Number(raw) : raw;
    return { key, type, fallback_value: fallback };
  });
}

/** The fields a template's PATCH changes (the builder's document is the builder's page), read
 *  from its draft form as one value. */
function draftOf(form, vars, builder) {
  const text = (name) => form.elements[name].value;
  const value = { name: text("name"), alias: text("alias").trim() || null, from: text("from").trim() || null,
    subject: text("subject") || null, reply_to: addressList(text("reply_to")), text: text("text") || null,
    variables: variablesOf(vars).filter((v) => v.key) };
  if (!builder) value.html = text("html");
  return value;
}

/** The draft, edited in place: saved a second after the typing stops ("Save draft" saves at
 *  once), with its state, and Undo back to the previous saved value. */
function draftCard(t, path, vars, html, verified, drawSamples) {
  const status = h("div#draft-state.save-state");
  const node = h("form.draft",
    h("div.inline", field("Name", ui.input("name", { value: t.name, required: true })),
      field("Alias", ui.input("alias", { value: t.alias || "" }))),
    h("div.inline", field("From", ui.input("from", { value: t.from || "", list: "from-choices", placeholder: verified[0] ? `news@${verified[0]}` : "" })),
      h("datalist#from-choices", { id: "from-choices" }, verified.map((d) => h("option", { value: `news@${d}` }))),
      field("Subject", ui.input("subject", { value: t.subject || "" }))),
    field("Reply-To", ui.input("reply_to", { value: [].concat(t.reply_to || []).join(", "), placeholder: "Addresses, separated by commas" })),
    t.builder ? h("p", "Designed in the visual builder: ", h("a", { href: `#/builder/${t.id}` }, "open it in the builder"), ".") : null,
    field("HTML", html, "Placeholders: {{{KEY}}} or {{{KEY|fallback}}}"),
    field("Text", h("textarea.code", { name: "text", rows: 4, spellcheck: "false" }, t.text || ""), "The plain-text part (optional)"),
    h("h3", "Variables"), vars,
    h("button.secondary.small", { type: "button", onclick: () => { vars.append(variableRow()); } }, "Add variable"));
  const { edits, undo } = ui.autosaved(node, {
    read: () => draftOf(node, vars, t.builder),
    show: (value) => {
      for (const name of ["name", "alias", "from", "subject", "text"]) node.elements[name].value = value[name] ?? "";
      node.elements.reply_to.value = value.reply_to.join(", ");
      if (!t.builder) html.value = value.html;
      vars.replaceChildren(...value.variables.map(variableRow));
      drawSamples();
    },
    save: async (value) => { await patch(path, value); drawSamples(); },
    status,
  });
  node.addEventListener("submit", (event) => { event.preventDefault(); edits.flush(); });
  node.append(h("div.row.save-bar", h("button.primary", { type: "submit" }, "Save draft"), undo, status));
  return h("section.card", h("h2", "Draft"), node);
}

async function templatePage(ui, id) {
  const path = `/dashboard/templates/${id}`;
  const [t, domains] = await Promise.all([get(path), get("/dashboard/domains")]);
  const verified = domains.data.filter((d) => d.status === "verified").map((d) => d.name);
  const vars = h("div.variables", t.variables.map(variableRow));
  const html = h("textarea.code", { name: "html", rows: 16, spellcheck: "false", "aria-label": "HTML" }, t.html || "");
  if (t.builder) html.readOnly = true;
  const frame = previewFrame("Template preview");
  const spamBox = h("div#preview-spam", { id: "preview-spam" });
  const samples = h("div.inline");
  const drawSamples = () => samples.replaceChildren(...variablesOf(vars).filter((v) => v.key).map((v) =>
    field(`Sample ${v.key}`, h("input", { "data-key": v.key, "data-type": v.type, value: v.fallback_value ?? "" }))));
  drawSamples();
  const sampleValues = () => Object.fromEntries([...samples.querySelectorAll("input")].filter((i) => i.value !== "")
    .map((i) => [i.dataset.key, i.dataset.type === "number" ? Number(i.value) : i.value]));
  const showPreview = async () => {
    const shown = await post(`${path}/preview`, { variables: sampleValues() });
    document.getElementById("preview-subject").textContent = `Subject: ${shown.subject || "(none)"}`;
    spamBox.replaceChildren(...[spamScoreView(shown.spam)].filter(Boolean));
    await frame.show(shown.html || "");
  };
  const diffBox = h("div#publish-diff", { id: "publish-diff" });
  const page = ui.shell("#/templates", h("h1", t.name),
    h("p", badge(t.status), " ", t.has_unpublished_versions ? "The draft differs from the published version." : "Published version is current.",
      t.alias ? ` Alias: ${t.alias}.` : ""),
    draftCard(t, path, vars, html, verified, drawSamples),
    h("section.card", h("h2", "Preview"), samples, ui.action("Preview with these values", showPreview, "primary small"),
      h("p#preview-subject", { id: "preview-subject" }), spamBox, frame),
    h("section.card", h("h2", "Publish"), ui.action("Compare with the published version", async () => {
      const [draft, published] = await Promise.all([get(path), get(`${path}/published`)]);
      diffBox.replaceChildren(
        published.id ? h("p", "Changes the publish makes (− published, + draft):") : h("p", "Never published: everything below is new."),
        diffView("Subject", published.subject, draft.subject), diffView("From", published.from, draft.from),
        diffView("HTML", published.html, draft.html), diffView("Text", published.text, draft.text),
        ui.action("Publish", async () => { await post(`${path}/publish`); ui.route(); }, "primary"));
    }), diffBox),
    h("section.card", h("h2", "Send a test"), ui.form(async (data) => {
      const sent = await post("/dashboard/emails", {
        from: data.get("from"), to: session.me.email, template: { id: t.id, variables: sampleValues() },
      });
      return h("p.ok", `Test sent to ${session.me.email} (`, h("a", { href: `#/emails/${sent.id}` }, "see it"), ").");
    }, h("p.muted", `Sends the published version to your own address, ${session.me.email}, with the sample values.`),
    h("div.inline", field("Send from", ui.input("from", { value: t.from || (verified[0] ? `test@${verified[0]}` : ""), required: true })),
      h("button.primary", { type: "submit" }, "Send test")))),
    h("section.card", h("h2", "Copy or delete"),
      ui.action("Duplicate", async () => { const c = await post(`${path}/duplicate`); location.hash = `#/templates/${c.id}`; }),
      " ", ui.action(`Delete ${t.name}`, async () => { await del(path); location.hash = "#/templates"; }, "danger small")));
  return page;
}
