// The content pages (issue 21): templates, the visual builder and broadcasts. app.js hands over
// its page helpers (shell, form, action, notice, route...) and registers the routes returned here.

import { post } from "/ui/api.js";
import { h, table } from "/ui/dom.js";
import { broadcastPages } from "/ui/broadcasts.js";
import { builderPages } from "/ui/builder.js";
import { templatePages } from "/ui/templates.js";

export function contentPages(ui) {
  return [...templatePages(ui), ...builderPages(ui), ...broadcastPages(ui)];
}

/** A sandboxed frame showing HTML with an e-mail's own CSP (the HTML is handed over once). */
export function previewFrame(title) {
  const frame = h("iframe.mailframe", { sandbox: "", title, src: "about:blank" });
  frame.show = async (html) => {
    const kept = await post("/dashboard/previews", { html });
    frame.src = kept.url;
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

/** Line diff (LCS) of two texts: [["=", line] | ["-", line] | ["+", line]]. */
export function lineDiff(before, after) {
  const a = String(before || "").split("\n");
  const b = String(after || "").split("\n");
  if (a.length * b.length > 4_000_000) return [...a.map((l) => ["-", l]), ...b.map((l) => ["+", l])];
  const n = a.length; const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0; let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push(["=", a[i]]); i++; j++; } else if (lcs[i + 1][j] >= lcs[i][j + 1]) { out.push(["-", a[i++]]); } else { out.push(["+", b[j++]]); }
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

export function diffView(label, before, after) {
  const lines = lineDiff(before, after);
  const changed = lines.some(([k]) => k !== "=");
  return h("div.diff", h("h3", label, changed ? "" : " (unchanged)"),
    changed ? h("pre.diff", lines.filter(([k], i) => k !== "=" || lines.slice(Math.max(0, i - 2), i + 3).some(([x]) => x !== "="))
      .map(([k, line]) => h(`span.d${k === "+" ? "add" : k === "-" ? "del" : "same"}`, `${k === "=" ? " " : k} ${line}\n`))) : null);
}
