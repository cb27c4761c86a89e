// What the content pages (templates, the visual builder, broadcasts) share: the sandboxed
// preview, the spam score beside it, the diff shown before a publish.

import { post } from "/ui/api.js";
import { lineDiff } from "/ui/diff.js";
import { h, safeUrl, table } from "/ui/dom.js";
import { effective } from "/ui/theme.js";

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
 *  starts as the dashboard's theme. */
export function mailPreview(source, frameClass = "mailframe") {
  const dark = effective(document.documentElement) === "dark";
  const frame = h(`iframe.${frameClass}`, { title: "HTML of the message", sandbox: "", referrerpolicy: "no-referrer",
    src: dark ? `${source}?scheme=dark` : source });
  const box = h(`div.framebox.${dark ? "dark" : "light"}`, frame);
  const toggle = (label, cls, on, then) => {
    const button = h("button.secondary.small", { type: "button", "aria-pressed": String(on) }, label);
    button.addEventListener("click", () => {
      const now = box.classList.toggle(cls);
      button.setAttribute("aria-pressed", String(now));
      if (then) then(now);
    });
    return button;
  };
  return [h("div.inline.toolbar", toggle("Phone width", "phone", false),
    toggle("Dark", "dark", dark, (on) => { box.classList.toggle("light", !on); frame.src = on ? `${source}?scheme=dark` : source; })),
  box];
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
    changed ? h("pre.diff", lines.filter(([k], i) => k !== "=" || lines.slice(Math.max(0, i - 2), i + 3).some(([x]) => x !== "="))
      .map(([k, line]) => h(`span.d${k === "+" ? "add" : k === "-" ? "del" : "same"}`, `${k === "=" ? " " : k} ${line}\n`))) : null);
}
