// The visual builder: a block editor over the builder document (docs/contract/dashboard.md,
// "Builder document"): the blocks on a canvas in the page, edited where they stand
// (web/buildercanvas.js), every other field of the selected block in the settings beside it
// (web/buildersettings.js), and Undo / Redo over every change (web/builderdoc.js). The preview is always the server's own
// rendering (POST /dashboard/template-builder/render, debounced), shown in a sandboxed frame at
// desktop or phone width, light or dark.

import { effective } from "/ui/theme.js";
import { ApiError, get, patch, post } from "/ui/api.js";
import { field, h } from "/ui/dom.js";
import { previewFrame } from "/ui/content.js";
import { History, giveIds, locate, moveBy, remove } from "/ui/builderdoc.js";
import { canvas, marksBar } from "/ui/buildercanvas.js";
import { settings, swatch } from "/ui/buildersettings.js";
import * as ui from "/ui/ui.js";

const AI_ERRORS = {
  plan_required: "AI generation comes with the top plan.",
  ai_disabled: "AI generation is not configured on this server.",
  ai_rate_limited: "Too many generations this minute; wait a little and try again.",
  ai_quota_exceeded: "This month's AI generations are used up; the quota renews on the 1st (UTC).",
  ai_busy: "The AI provider is busy right now; try again in a moment.",
  ai_unavailable: "The AI provider could not be reached or answered an error.",
  ai_timeout: "The AI provider took too long to answer.",
  ai_invalid_output: "The AI answered something that is not a usable e-mail, even after a second try. Rephrase the prompt.",
  ai_refused: "The AI declined this prompt.",
};
const FONTS = ["system", "inter", "helvetica", "georgia", "verdana", "trebuchet"];
const THEME = [["brand_color", "color"], ["text_color", "color"], ["background_color", "color"], ["content_color", "color"],
  ["link_color", "color"], ["font", FONTS], ["content_width", "number"],
  ["radius", "number"], ["logo_url", "url"], ["logo_dark_url", "url"], ["logo_width", "number"], ["web_font", "text"],
  ["heading_web_font", "text"]];

let dirty = false;
window.addEventListener("beforeunload", (e) => { if (dirty && document.getElementById("builder")) { e.preventDefault(); e.returnValue = ""; } });
document.addEventListener("click", (e) => {
  const a = e.target.closest && e.target.closest("a[href^='#']");
  if (a && dirty && document.getElementById("builder") && !confirm("Leave the builder? Unsaved changes will be lost.")) e.preventDefault();
}, true);
// Ctrl+Z / Ctrl+Shift+Z (or Ctrl+Y) on the builder shown: its own undo and redo.
let shortcuts = null;
document.addEventListener("keydown", (e) => { if (shortcuts && document.getElementById("builder")) shortcuts(e); });

export const nav = ["#/builder", "Builder"];
export const routes = [
  [/^#\/builder\/([\w-]+)$/, (m) => builderPage(ui, m[1])],
  [/^#\/builder$/, () => builderPage(ui, null)],
];

function uid() { return crypto.randomUUID(); }

export function newBlock(type) {
  const icon = `${location.origin}/files/social/github.png`;
  const base = { id: uid(), type };
  switch (type) {
    case "heading": return { ...base, level: 1, text: "A heading" };
    case "text": return { ...base, text: "Some text." };
    case "button": return { ...base, label: "Click here", href: "https://example.com/" };
    case "image": return { ...base, src: icon, alt: "A picture", width: 56 };
    case "divider": return { ...base, thickness: 1 };
    case "spacer": return { ...base, height: 24 };
    case "columns": return { ...base, columns: [{ blocks: [] }, { blocks: [] }] };
    case "list": return { ...base, ordered: false, items: [[{ text: "First" }], [{ text: "Second" }]] };
    case "quote": return { ...base, text: "A quote." };
    case "code": return { ...base, text: "code()" };
    case "social": return { ...base, links: [{ network: "github", url: "https://github.com/" }] };
    case "footer": return { ...base, text: "You receive this because you signed up.", unsubscribe: true };
    default: return base;
  }
}

async function builderPage(ui, templateId) {
  const caps = await get("/dashboard/template-builder");
  if (!caps.builder) return ui.shell("#/builder", h("h1", "Builder"), h("section.card", h("p", `The visual builder comes with the ${caps.required_plan} plan.`)));
  const template = templateId ? await get(`/dashboard/templates/${templateId}`) : null;
  let doc = template && template.builder ? structuredClone(template.builder) : { version: 1, preview_text: "", theme: {}, blocks: [] };
  doc.theme = doc.theme || {};
  giveIds(doc.blocks, uid);
  const history = new History();
  let selected = null;
  dirty = false;
  const frame = previewFrame("Live preview");
  // The preview starts as the dashboard's theme; "Light / dark" flips it (the frame's color-scheme).
  const frameBox = h(`div.framebox.desktop.${effective(document.documentElement)}`, frame);
  const canvasBox = h("div.canvasbox");
  const settingsBox = h("div#settings", { id: "settings" });
  const themeBox = h("div#theme", { id: "theme" });
  const status = h("p#render-status", { id: "render-status", role: "status" });
  const undoB = h("button.secondary.small", { type: "button" }, "Undo");
  const redoB = h("button.secondary.small", { type: "button" }, "Redo");
  let timer = null;

  // One render at a time (a render may be waiting out a 429): edits meanwhile ask for one more
  // render, of the document as it is when that one starts.
  let rendering = false; let renderAgain = false;
  const render = async () => {
    if (rendering) { renderAgain = true; return; }
    rendering = true;
    status.textContent = "Rendering…";
    try {
      const out = await post("/dashboard/template-builder/render", { document: doc });
      await frame.show(out.html);
      if (!renderAgain) status.textContent = "Preview up to date.";
    } catch (error) {
      status.textContent = `Cannot render: ${error.message}`;
    } finally {
      rendering = false;
      if (renderAgain) { renderAgain = false; render(); }
    }
  };
  const schedule = () => { clearTimeout(timer); timer = setTimeout(render, 400); };
  // The views drawn again after a change, but for ``kept`` (the one the change was made in).
  const draw = (kept = []) => {
    if (!kept.includes("canvas")) canvasBox.replaceChildren(canvas(ctx));
    if (!kept.includes("theme")) themeBox.replaceChildren(themePanel());
    if (!kept.includes("settings")) settingsBox.replaceChildren(settingsPanel());
    undoB.disabled = !history.canUndo; redoB.disabled = !history.canRedo;
    schedule();
  };
  // ``redraw``: true draws every view again; false keeps the theme's form, where the change was
  // typed; a view's name keeps that one (and the theme).
  function change(mutate, redraw = true) {
    history.record(doc);
    mutate();
    dirty = true;
    draw(redraw === true ? [] : redraw === false ? ["theme"] : [redraw, "theme"]);
  }
  const step = (to) => { if (to) { doc = to; dirty = true; draw(); } };
  const undo = () => step(history.undo(doc));
  const redo = () => step(history.redo(doc));
  undoB.addEventListener("click", undo);
  redoB.addEventListener("click", redo);
  shortcuts = (e) => {
    const key = e.key.toLowerCase();
    if (!(e.ctrlKey || e.metaKey) || e.altKey || (key !== "z" && key !== "y")) return;
    if (e.target.matches && e.target.matches("input, textarea, select")) return;
    e.preventDefault();
    // Text being edited on the canvas is taken in first (one change), then undone with the rest.
    if (e.target.isContentEditable) e.target.blur();
    if (e.shiftKey || key === "y") redo(); else undo();
  };
  const byId = (id) => [...canvasBox.querySelectorAll("[data-block]")].find((node) => node.dataset.block === id);
  const ctx = {
    doc: () => doc,
    selected: () => selected,
    newBlock,
    change,
    // Selecting draws the outline on the canvas and the settings again, not the canvas (a caret stays).
    select(id) {
      selected = id;
      canvasBox.querySelectorAll("[data-block]").forEach((node) => {
        node.classList.toggle("selected", node.dataset.block === id);
        if (node.dataset.block === id) node.setAttribute("aria-current", "true"); else node.removeAttribute("aria-current");
      });
      settingsBox.replaceChildren(settingsPanel());
    },
    focus(id) { const node = byId(id); if (node) node.focus(); },
  };
  function settingsPanel() {
    const at = selected ? locate(doc.blocks, selected) : null;
    return settings(at && at.block, (mutate, again) => change(mutate, again ? true : "settings"), {
      move: (by) => { if (at.index + by >= 0 && at.index + by < at.list.length) change(() => moveBy(doc.blocks, selected, by)); },
      remove: () => { change(() => remove(doc.blocks, selected)); ctx.select(null); },
    });
  }

  function themePanel() {
    return h("div.theme", THEME.map(([key, kind]) => {
      const value = doc.theme[key] ?? "";
      if (kind === "color") {
        return swatch(value, key.replace(/_/g, " "), (picked) => change(() => {
          if (picked) doc.theme[key] = picked; else delete doc.theme[key];
        }), key);
      }
      const inputNode = Array.isArray(kind)
        ? h("select", { name: key }, h("option", { value: "" }, "(account theme)"), kind.map((f) => h("option", { value: f, selected: f === value }, f)))
        : h("input", { name: key, type: kind, value });
      inputNode.addEventListener("change", () => change(() => {
        if (inputNode.value === "") delete doc.theme[key];
        else doc.theme[key] = kind === "number" ? Number(inputNode.value) : inputNode.value;
      }, false));
      return field(key.replace(/_/g, " "), inputNode);
    }));
  }

  // AI generation
  const quota = h("p#ai-quota", { id: "ai-quota" });
  const showQuota = (ai) => {
    quota.textContent = caps.ai_available
      ? `${ai.remaining} of ${ai.monthly_quota} generations left this month (${ai.per_minute} a minute).`
      : "AI generation is not available (not configured, or not in this plan).";
  };
  // Generations and brand imports with an AI pick both count: the quota is read again after each.
  const refreshQuota = async () => { if (caps.ai_available) showQuota((await get("/dashboard/template-builder")).ai); };
  showQuota(caps.ai);
  const aiBox = h("section.card", h("h2", "Generate with AI"), quota, ui.form(async (data) => {
    try {
      const out = await post("/dashboard/template-builder/ai/generate", { prompt: data.get("prompt") });
      change(() => {
        doc = { ...out.document, theme: { ...(out.document.theme || {}), ...doc.theme } };
        giveIds(doc.blocks, uid);
        if (out.subject) subject.value = out.subject;
      });
      return h("p.ok", "Generated: the design below was replaced (Undo brings yours back).");
    } catch (error) {
      if (error instanceof ApiError && AI_ERRORS[error.name]) throw new Error(`${AI_ERRORS[error.name]} (${error.name})`);
      throw error;
    } finally {
      await refreshQuota().catch(() => {});
    }
  }, field("Describe the e-mail", h("textarea", { name: "prompt", rows: 2, maxlength: 2000, required: true })),
  h("button.primary", { type: "submit", disabled: !caps.ai_available }, "Generate")));

  // Brand import: the proposals are shown, the user picks, "Apply" saves them as the account's
  // theme and puts them in this document's theme.
  const brandBox = h("div#brand-result", { id: "brand-result" });
  const importBox = h("section.card", h("h2", "Import from website"), ui.form(async (data) => {
    const found = await post("/dashboard/brand/import", { url: data.get("url"), apply: false });
    brandBox.replaceChildren(brandChoices(found));
    await refreshQuota().catch(() => {});
  }, h("div.inline", field("Website", ui.input("url", { value: caps.suggested_website || "", required: true })),
    h("button.primary", { type: "submit" }, "Import"))), brandBox);

  function brandChoices(found) {
    const proposed = found.theme || {};
    const radio = (name, value, checked, ...label) => h("label.choice",
      h("input", { type: "radio", name, value, checked }), ...label);
    const logos = h("div.logos", { role: "radiogroup", "aria-label": "Logo" }, found.logos.map((logo) => radio("logo", logo.url,
      logo.url === proposed.logo_url, h("img", { src: logo.url, alt: `Logo from ${logo.source}`, width: 80 }),
      ` ${logo.source} (${logo.width}×${logo.height})`)));
    const colours = (found.colors || []).slice(0, 8);
    const palette = [["brand_color", "Brand colour"], ["text_color", "Text colour"], ["link_color", "Link colour"]].map(([key, label]) =>
      h("div.swatches", { role: "radiogroup", "aria-label": label }, h("p", label), colours.map((c) => radio(key, c.hex,
        c.hex === proposed[key], h("span.chip", { "data-hex": c.hex }), ` ${c.hex} ${c.role}`))));
    // A web font is loaded where the client can; the safe font is what the others show.
    const fallback = h("select", { "aria-label": "Safe font" }, FONTS.map((f) => h("option", { value: f, selected: f === (proposed.font || "system") }, f)));
    const webFonts = [["web_font", "Body web font"], ["heading_web_font", "Heading web font"]].map(([key, label]) =>
      h("div.fonts", { role: "radiogroup", "aria-label": label }, h("p", label),
        radio(key, "", !proposed[key], " none"),
        (found.fonts || []).filter((f) => f.google).map((f) => radio(key, f.family, f.family === proposed[key],
          ` ${f.family} (${f.role}; else ${f.fallback})`))));
    webFonts[0].addEventListener("change", (e) => {
      const font = (found.fonts || []).find((f) => f.family === e.target.value);
      fallback.value = font ? font.fallback : "system";
    });
    const node = h("div", h("h3", `Found on ${found.url}`), h("p", found.ai && found.ai.rationale ? found.ai.rationale : ""),
      h("h4", "Logo"), logos, h("h4", "Palette"), palette, h("h4", "Fonts"),
      h("p", "Fonts seen: ", (found.fonts || []).map((f) => `${f.family} (${f.role})`).join(", ") || "none"),
      webFonts, field("Safe font", fallback),
      ui.action("Apply to theme", async () => {
        const picked = { ...proposed, font: fallback.value };
        for (const key of ["logo", "brand_color", "text_color", "link_color", "web_font", "heading_web_font"]) {
          const chosen = [...node.querySelectorAll("input:checked")].find((box) => box.name === key);
          if (chosen) picked[key === "logo" ? "logo_url" : key] = chosen.value;
        }
        for (const k of Object.keys(picked)) if (picked[k] === "" || picked[k] === null) delete picked[k];
        await patch("/dashboard/template-builder/theme", { theme: picked, brand: found.brand });
        change(() => {
          for (const key of ["web_font", "heading_web_font"]) delete doc.theme[key];
          doc.theme = { ...doc.theme, ...picked };
        });
        node.append(h("p.ok#brand-applied", { id: "brand-applied" }, "Applied to the theme (and saved as the account's theme)."));
      }, "primary"));
    node.querySelectorAll(".chip").forEach((chip) => { chip.style.background = chip.dataset.hex; });
    return node;
  }

  const name = h("input", { value: template ? template.name : "", required: true, "aria-label": "Template name" });
  const subject = h("input", { value: template ? template.subject || "" : "", "aria-label": "Subject" });
  const saveStatus = h("p#save-status", { id: "save-status", role: "status" });
  const save = ui.action(template ? "Save template" : "Save as template", async () => {
    if (!name.value.trim()) throw new Error("Give the template a name.");
    const body = { name: name.value, builder: doc, subject: subject.value || null };
    let id = templateId;
    if (template) await patch(`/dashboard/templates/${templateId}`, body);
    else id = (await post("/dashboard/templates", body)).id;
    dirty = false;
    saveStatus.replaceChildren("Saved. ", h("a", { href: `#/templates/${id}` }, "Open the template"));
    saveStatus.dataset.templateId = id;
  }, "primary");
  const width = (cls) => () => { frameBox.classList.remove("desktop", "phone"); frameBox.classList.add(cls); };
  undoB.title = "Ctrl+Z"; redoB.title = "Ctrl+Shift+Z";
  const page = ui.shell("#/builder", h("h1", template ? `Builder: ${template.name}` : "Builder"),
    h("div#builder.builder", { id: "builder" },
      h("section.card.meta", h("div.inline", field("Template name", name), field("Subject", subject), save, undoB, redoB), saveStatus,
        field("Preview text", (() => { const p = h("input", { value: doc.preview_text || "" }); p.addEventListener("change", () => change(() => { doc.preview_text = p.value; }, false)); return p; })())),
      h("section.card.canvascard", { "aria-labelledby": "canvas-title" }, h("h2#canvas-title", { id: "canvas-title" }, "Canvas"),
        h("p.muted", "Click a block to select it and type in it (Ctrl+B bold, Ctrl+I italic, Ctrl+K link); its other settings are in the panel. Drag a block, or select it and press Alt+↑ / Alt+↓; + inserts one."),
        marksBar(), canvasBox),
      h("div.sidepane",
        h("section.card.settingscard", h("h2", "Settings"), settingsBox),
        h("section.card.previewpane", h("h2", "Preview"),
        h("div.inline", h("button.secondary.small", { type: "button", onclick: width("desktop") }, "Desktop"),
          h("button.secondary.small", { type: "button", onclick: width("phone") }, "Phone"),
          h("button.secondary.small", { type: "button", onclick: () => frameBox.classList.toggle("light", !frameBox.classList.toggle("dark")) }, "Light / dark")),
        status, frameBox)),
      h("section.card", h("h2", "Theme"), themeBox), aiBox, importBox));
  draw();
  return page;
}
