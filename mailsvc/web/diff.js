// The line diff shown before a template is published. No DOM here (tests/web/ runs it under node).

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
