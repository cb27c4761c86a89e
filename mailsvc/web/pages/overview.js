// The overview: the last 30 days' sends and outcomes, per day, and the quotas.

import { get } from "/ui/api.js";
import { h, svg } from "/ui/dom.js";
import { shell } from "/ui/ui.js";

/** Per day, a bar of what was sent and beside it one of the outcomes (delivered, then bounced
 *  or complained on top). A day with any mail has a visible bar however small beside the busiest
 *  day; a day without has none. The chart takes its card's width. */
function chart(days) {
  const width = 720, height = 220, pad = 28;
  const max = Math.max(1, ...days.map((d) => Math.max(d.sent, d.delivered + d.bounced + d.complained)));
  const step = (width - pad) / days.length;
  const base = height - pad;
  const tall = (v) => (v > 0 ? Math.max(3, (v / max) * (height - 2 * pad)) : 0);
  const bar = (x, top, size, cls, title) => (size > 0
    ? [svg("rect", { x, y: top - size, width: step * 0.42, height: size, class: cls }, svg("title", {}, title))] : []);
  const bars = days.flatMap((d, i) => {
    const x = pad + i * step;
    const title = `${d.day}: ${d.sent} sent, ${d.delivered} delivered, ${d.bounced} bounced, ${d.complained} complained`;
    const delivered = tall(d.delivered);
    const failed = tall(d.delivered + d.bounced + d.complained) - delivered;
    return [
      ...bar(x + step * 0.06, base, tall(d.sent), "bar-sent", title),
      ...bar(x + step * 0.5, base, delivered, "bar-delivered", title),
      ...bar(x + step * 0.5, base - delivered, d.bounced + d.complained > 0 ? Math.max(3, failed) : 0, "bar-failed", title),
    ];
  });
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart days",
    "aria-label": "Sends and outcomes per day over 30 days" },
  svg("line", { x1: pad, y1: base, x2: width, y2: base, class: "axis" }),
  svg("text", { x: 0, y: pad, class: "tick" }, String(max)),
  svg("text", { x: pad, y: height - 8, class: "tick" }, days[0].day),
  svg("text", { x: width - 80, y: height - 8, class: "tick" }, days[days.length - 1].day),
  bars);
}

function meter(label, used, limit) {
  return h("div.meter",
    h("div.meter-label", h("span", label), h("span", `${used.toLocaleString()} / ${limit.toLocaleString()}`)),
    h("progress", { max: limit, value: Math.min(used, limit), "aria-label": `${label}: ${used} of ${limit}` }));
}

async function overviewPage() {
  const stats = await get("/dashboard/stats");
  const totals = stats.days.reduce((t, d) => ({ sent: t.sent + d.sent, delivered: t.delivered + d.delivered,
    bounced: t.bounced + d.bounced, complained: t.complained + d.complained }), { sent: 0, delivered: 0, bounced: 0, complained: 0 });
  return shell("#/",
    h("h1", "Overview"),
    h("section.cards",
      ...Object.entries(totals).map(([k, v]) => h("div.card.stat", h("span.stat-value", String(v)), h("span.muted", `${k} (30 days)`)))),
    h("section.card", h("h2", "Sends and outcomes per day"), chart(stats.days),
      h("p.legend", h("span.key.k-sent", "sent"), h("span.key.k-delivered", "delivered"), h("span.key.k-failed", "bounced or complained"))),
    h("section.card", h("h2", "Quota"),
      meter("Today", stats.usage.day, stats.usage.daily_quota),
      meter("This month", stats.usage.month, stats.usage.monthly_quota)));
}

export const nav = ["#/", "Overview"];
export const routes = [[/^#\/?$/, () => overviewPage()]];
