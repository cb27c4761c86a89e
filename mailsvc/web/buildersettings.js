// The selected block's settings, beside the builder's canvas: its link, colours (a swatch with
// the native colour picker, or "Default" when the theme decides), alignment, spacing and size,
// and what a type has besides the text typed on the canvas (a heading's level, a button's or an
// image's link, a picture's size, a list's items, social links, a footer's unsubscribe link).

import { field, h } from "/ui/dom.js";

const ALIGNS = [["", "Default"], ["left", "Left"], ["center", "Centre"], ["right", "Right"]];
const SIDES = ["top", "right", "bottom", "left"];
const COLOURS = [["color", "Text colour"], ["background", "Background"]];

/** The panel for ``block`` (or a hint when none is selected); ``change(mutate)`` keeps the panel;
 *  ``act`` has ``move(by)`` and ``remove()`` (buttons, for a phone without Alt+arrows). */
export function settings(block, change, act) {
  if (!block) return h("p.muted", "Select a block on the canvas to see its settings.");
  const parts = [h("div.settingshead", h("h3", `${block.type} block`), h("span.tools",
    h("button.secondary.small", { type: "button", "aria-label": "Move block up", onclick: () => act.move(-1) }, "↑"),
    h("button.secondary.small", { type: "button", "aria-label": "Move block down", onclick: () => act.move(1) }, "↓"),
    h("button.danger.small", { type: "button", onclick: act.remove }, "Remove block")))];
  parts.push(...own(block, change));
  if (block.type !== "spacer" && block.type !== "columns") parts.push(...styling(block, change));
  return h("div.settings", parts);
}

function input(block, key, label, attrs, change, cast = (v) => v) {
  const node = h("input", { ...attrs, value: block[key] ?? "" });
  node.addEventListener("change", () => change(() => {
    if (node.value === "") delete block[key]; else block[key] = cast(node.value);
  }));
  return field(label, node);
}

function check(block, key, label, change) {
  const box = h("input", { type: "checkbox", checked: !!block[key] });
  box.addEventListener("change", () => change(() => { block[key] = box.checked; }));
  return h("label.choice", box, ` ${label}`);
}

function lines(block, label, read, write, change) {
  const node = h("textarea", { rows: 3 }, read(block));
  node.addEventListener("change", () => change(() => write(block, node.value)));
  return field(label, node);
}

function own(block, change) {
  const number = (v) => Number(v);
  switch (block.type) {
    case "heading": {
      const level = h("select", [1, 2, 3].map((n) => h("option", { value: n, selected: (block.level || 1) === n }, `Level ${n}`)));
      level.addEventListener("change", () => change(() => { block.level = Number(level.value); }, true));
      return [field("Heading level", level)];
    }
    case "button": return [input(block, "href", "Button URL", { type: "url" }, change), check(block, "full_width", "Full width", change)];
    case "image": return [input(block, "src", "Image URL", { type: "url" }, change), input(block, "alt", "Alt text", {}, change),
      input(block, "width", "Width (px)", { type: "number", min: 1, max: 800 }, change, number),
      input(block, "height", "Height (px)", { type: "number", min: 1, max: 4000, placeholder: "auto" }, change, number),
      input(block, "href", "Link URL", { type: "url" }, change)];
    case "divider": return [input(block, "thickness", "Thickness (px)", { type: "number", min: 1, max: 20 }, change, number)];
    case "spacer": return [input(block, "height", "Height (px)", { type: "number", min: 1, max: 400 }, change, number)];
    case "list": return [check(block, "ordered", "Numbered", change),
      lines(block, "Items, one a line", (b) => (b.items || []).map((runs) => runs.map((r) => r.text).join("")).join("\n"),
        (b, v) => { b.items = v.split("\n").filter(Boolean).map((t) => [{ text: t }]); }, change)];
    case "social": return [lines(block, "Links: network URL, one a line", (b) => (b.links || []).map((l) => `${l.network} ${l.url}`).join("\n"),
      (b, v) => { b.links = v.split("\n").filter(Boolean).map((l) => { const [network, url] = l.trim().split(/\s+/); return { network, url }; }); }, change)];
    case "footer": return [check(block, "unsubscribe", "Unsubscribe link", change),
      input(block, "unsubscribe_label", "Unsubscribe label", { placeholder: "Unsubscribe" }, change),
      input(block, "unsubscribe_url", "Unsubscribe URL", { inputmode: "url", placeholder: "the recipient's own link" }, change)];
    default: return [];
  }
}

function styling(block, change) {
  const style = () => { block.style = block.style || {}; return block.style; };
  const current = block.style || {};
  const align = h("div.segmented", { role: "radiogroup", "aria-label": "Alignment" }, ALIGNS.map(([value, label]) => {
    const radio = h("input", { type: "radio", name: `align-${block.id}`, value, checked: (current.align || "") === value });
    radio.addEventListener("change", () => change(() => { if (value) style().align = value; else delete style().align; }));
    return h("label", radio, h("span", label));
  }));
  const size = h("input", { type: "number", min: 10, max: 64, value: current.font_size ?? "", placeholder: "theme" });
  size.addEventListener("change", () => change(() => { if (size.value) style().font_size = Number(size.value); else delete style().font_size; }));
  const padding = h("div.padding", SIDES.map((side) => {
    const node = h("input", { type: "number", min: 0, max: 200, value: current.padding ? current.padding[side] ?? 0 : "", placeholder: "0" });
    node.addEventListener("change", () => change(() => {
      const given = SIDES.map((s) => [s, s === side ? Number(node.value || 0) : Number((style().padding || {})[s] || 0)]);
      if (given.every(([, v]) => v === 0)) delete style().padding; else style().padding = Object.fromEntries(given);
    }));
    return field(side, node);
  }));
  return [h("h4", "Style"), h("p.fieldset-label", "Alignment"), align,
    h("div.swatchrow", COLOURS.map(([key, label]) => swatch(current[key], label, (value) => change(() => {
      if (value) style()[key] = value; else delete style()[key];
    }, true)))),
    field("Font size (px)", size), h("p.fieldset-label", "Spacing (px)"), padding];
}

/** A colour: a chip showing it (striped while the theme's applies, "Theme"), the native picker
 *  (named ``name`` in a form), and a button back to the theme's. */
export function swatch(value, label, set, name = null) {
  const chip = h("span.swatch", { "aria-hidden": "true" });
  if (value) chip.style.background = value; else chip.classList.add("unset");
  const picker = h("input", { type: "color", name, value: value || "#000000", "aria-label": label });
  picker.addEventListener("change", () => set(picker.value.toLowerCase()));
  const reset = h("button.secondary.small", { type: "button", disabled: !value, "aria-label": `${label}: back to the theme's` }, "Default");
  reset.addEventListener("click", () => set(null));
  return h("div.swatchfield", h("span.swatchlabel", label), h("label.swatchpick", chip, picker,
    h("span.swatchvalue", value || "Theme")), reset);
}
