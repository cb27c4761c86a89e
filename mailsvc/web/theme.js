// The colour theme: Auto (the system's prefers-color-scheme), Light or Dark, chosen in the header
// and kept per browser (localStorage). The choice is data-theme on <html>; style.css holds both
// palettes. Nothing touches the DOM at import (tests/web/ runs it under node).

export const KEY = "mailsvc.theme";
/** The event the document gets when the switch changes the theme (a preview follows it). */
export const THEME_CHANGED = "mailsvc-theme";
export const CHOICES = [["auto", "Auto"], ["light", "Light"], ["dark", "Dark"]];

/** The choice kept in ``storage`` (one it does not know, or none: "auto"). */
export function stored(storage) {
  let value = null;
  try { value = storage ? storage.getItem(KEY) : null; } catch { value = null; }
  return CHOICES.some(([c]) => c === value) ? value : "auto";
}

/** Applies ``choice`` to ``root`` (Auto: no attribute, the media query decides). */
export function apply(choice, root) {
  if (choice === "light" || choice === "dark") root.setAttribute("data-theme", choice);
  else root.removeAttribute("data-theme");
}

/** Keeps ``choice`` in ``storage`` and applies it. */
export function choose(choice, storage, root) {
  try { storage.setItem(KEY, choice); } catch { /* private mode: for this page only */ }
  apply(choice, root);
  if (root.dispatchEvent) root.dispatchEvent(new Event(THEME_CHANGED, { bubbles: true }));
}

/** "dark" or "light": what the page shows now (the choice on ``root``, else the system's). */
export function effective(root, media = globalThis.matchMedia) {
  const chosen = root.getAttribute("data-theme");
  if (chosen === "light" || chosen === "dark") return chosen;
  return media && media("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}
