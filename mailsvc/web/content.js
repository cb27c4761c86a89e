// What the content pages (templates, the visual builder, broadcasts) share: the sandboxed
// preview, the spam score beside it, the diff shown before a publish.

import { post } from "/ui/api.js";
import { lineDiff } from "/ui/diff.js";
import { h, safeUrl, table } from "/ui/dom.js";

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

/** The spam score beside a preview (issue 23): score, threshold and the rules that hit, all as
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
