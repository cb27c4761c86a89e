// What the page builder lets through (mailsvc/web/dom.js), under node: links and sources are
// http(s), mailto or this origin's paths; and no module builds a CSS selector out of data.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { instant, parseSpec, relative, safeUrl } from "../../mailsvc/web/dom.js";

const PAGE = "https://mail.example.net/ui/";
const WEB = new URL("../../mailsvc/web/", import.meta.url).pathname;

test("http(s) and mailto URLs, paths and routes of the page pass unchanged", () => {
  for (const url of ["https://example.com/hooks?a=1", "http://127.0.0.1:9/x", "mailto:ann@example.com",
    "/dashboard/emails/1/html", "#/emails", "#main", "?q=1", "relative/path", "/files/brand/logo.png"]) {
    assert.equal(safeUrl(url, PAGE), url, url);
  }
});

test("every other scheme is refused, however it is spelled", () => {
  for (const url of ["javascript:alert(1)", " JavaScript:alert(1)", "java\tscript:alert(1)", "\u0001javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>", "vbscript:msgbox(1)", "about:blank", "blob:https://x/1", "file:///etc/passwd",
    "ftp://example.com/"]) {
    assert.equal(safeUrl(url, PAGE), null, url);
  }
});

test("what cannot be read as a URL is refused", () => {
  assert.equal(safeUrl("http://[::1", PAGE), null);
  assert.equal(safeUrl("/ui/", undefined), null);  // no page to read a path against
});

test("an element's spec gives its id and classes in either order", () => {
  const card = { tag: "section", id: "edit", classes: ["card", "wide"] };
  assert.deepEqual(parseSpec("section#edit.card.wide"), card);
  assert.deepEqual(parseSpec("section.card#edit.wide"), card);
  assert.deepEqual(parseSpec("section.card.wide#edit"), card);
  assert.deepEqual(parseSpec("p"), { tag: "p", id: undefined, classes: [] });
  assert.deepEqual(parseSpec(".note"), { tag: "div", id: undefined, classes: ["note"] });
});

function modules(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return modules(path);
    return entry.name.endsWith(".js") ? [path] : [];
  });
}

test("no module builds a selector from data (template or concatenation in querySelector, closest, matches)", () => {
  const built = /\.(querySelector|querySelectorAll|closest|matches)\(\s*(`[^`]*\$\{|[^)]*["'`]\s*\+)/;
  const found = modules(WEB).flatMap((path) => readFileSync(path, "utf8").split("\n")
    .map((line, i) => [`${path.slice(WEB.length)}:${i + 1}`, line]).filter(([, line]) => built.test(line)));
  assert.deepEqual(found, []);
  assert.ok(built.test('x.querySelector(`[data-block="${id}"]`)') && built.test("x.querySelector('input[name=' + key + ']')"));
});

test("a moment is told relative to now, past or to come; a month or more away, its date", () => {
  const now = Date.parse("2026-12-01T12:00:00Z");
  const before = (s) => relative(now - s * 1000, now);
  assert.equal(before(10), "just now");
  assert.equal(before(-10), "in a moment");
  assert.equal(before(60), "1 min ago");
  assert.equal(before(59 * 60), "59 min ago");
  assert.equal(before(-5 * 60), "in 5 min");
  assert.equal(before(3 * 3600), "3 h ago");
  assert.equal(before(86400), "1 day ago");
  assert.equal(before(-2 * 86400), "in 2 days");
  assert.equal(before(45 * 86400), "2026-10-17");
});

test("an API time is read as the instant it names, in either of the forms the API writes", () => {
  const iso = instant("2026-12-02T06:25:19.5Z");
  assert.equal(iso.toISOString(), "2026-12-02T06:25:19.500Z");
  assert.equal(instant("2026-12-02 06:25:19.5+00").toISOString(), "2026-12-02T06:25:19.500Z");
  assert.equal(instant("2026-12-02 07:25:19+01").toISOString(), "2026-12-02T06:25:19.000Z");
  assert.equal(instant("2026-12-02T06:25:19+00:00").toISOString(), "2026-12-02T06:25:19.000Z");
  assert.equal(instant(""), null);
  assert.equal(instant("not a time"), null);
});
