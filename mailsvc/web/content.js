// What the content pages (templates, the visual builder, broadcasts) share: the sandboxed
// preview, the spam score beside it, the diff shown before a publish.

import { post } from "/ui/api.js";
import { lineDiff } from "/ui/diff.js";
import { h, safeUrl, table } from "/ui/dom.js";
import { THEME_CHANGED, effective } from "/ui/theme.js";

/** A sandboxed frame showing HTML with an e-mail's own CSP (the HTML is handed over once). */
export function previewFrame(title) {
  const frame = h("iframe.mailframe", { sandbox: "", title });
  frame.show = async (html) => {
    const kept = await post("/dashboard/previews", { html });
    const url = safeUrl(kept.url);
    if (url) frame.src = url;
  };
  return frame;
}

/** An e-mail's HTML from ``source`` (a path of this origin) in a sandboxed frame (no script, no
 *  same-origin), with its "Phone width" (375 px) and "Dark" toggles. Dark is the message as a
 *  client in dark mode shows it: the frame loads ``source?scheme=dark``, the HTML with its own
 *  prefers-color-scheme rules applied by the server (docs/decisions.md, "The Inbox page"). It
 *  follows the dashboard's theme (the system's or the switch's) until "Dark" is pressed. */
export function mailPreview(source, frameClass = "mailframe") {
  const frame = h(`iframe.${frameClass}`, { title: "HTML of the message", sandbox: "", referrerpolicy: "no-referrer" });
  const box = h("div.framebox", frame);
  const button = (label) => h("button.secondary.small", { type: "button", "aria-pressed": "false" }, label);
  const phone = button("Phone width"), darkButton = button("Dark");
  const show = (dark) => {
    box.classList.toggle("dark", dark);
    box.classList.toggle("light", !dark);
    darkButton.setAttribute("aria-pressed", String(dark));
    const wanted = dark ? `${source}?scheme=dark` : source;
    if (frame.getAttribute("src") !== wanted) frame.src = wanted;
  };
  let chosen = false;
  const media = globalThis.matchMedia("(prefers-color-scheme: dark)");
  const follow = () => {
    if (!frame.isConnected) {  // the page was left
      media.removeEventListener("change", follow);
      document.removeEventListener(THEME_CHANGED, follow);
    } else if (!chosen) show(effective(document.documentElement) === "dark");
  };
  phone.addEventListener("click", () => phone.setAttribute("aria-pressed", String(box.classList.toggle("phone"))));
  darkButton.addEventListener("click", () => { chosen = true; show(!box.classList.contains("dark")); });
  media.addEventListener("change", follow);
  document.addEventListener(THEME_CHANGED, follow);
  show(effective(document.documentElement) === "dark");
  return [h("div.inline.toolbar", phone, darkButton), box];
}

/** The spam score beside a preview: score, threshold and the rules that hit, all as
 *  text; a short line when scoring failed; nothing when the reply has no ``spam`` (spamd is not
 *  configured). */
export function spamScoreView(spam) {
  if (!spam) return null;
  if (spam.error !== undefined || typeof spam.score !== "number") {
    return h("div.spam-score", { "aria-live": "polite" },
      h("p.muted", `Spam score unavailable: ${spam.error || "no answer from the scorer"}.`));
  }
  const verdict = spam.is_spam ? "likely spam" : "under the threshold";
  return h("div.spam-score", { "aria-live": "polite" },
    h("p", h("strong", `Spam score ${spam.score} / ${spam.threshold}`), ` (${verdict})`),
    spam.rules.length
      ? table(["Rule", "Points", "Description"], spam.rules.map((r) => h("tr",
        h("td", h("code", r.name)), h("td", String(r.score)), h("td", r.description || ""))), "Rules that hit")
      : h("p.muted", "No rule hit."));
}

export function diffView(label, before, after) {
  const lines = lineDiff(before, after);
  const changed = lines.some(([k]) => k !== "=");
  return h("div.diff", h("h3", label, changed ? "" : " (unchanged)"),
    changed ? h("pre.diff", { tabindex: "0" }, lines.filter(([k], i) => k !== "=" || lines.slice(Math.max(0, i - 2), i + 3).some(([x]) => x !== "="))
      .map(([k, line]) => h(`span.d${k === "+" ? "add" : k === "-" ? "del" : "same"}`, `${k === "=" ? " " : k} ${line}\n`))) : null);
}
