// The overview: a period's (7 or 30 days) sends and outcomes, per day, with their rates, of the
// account or of one sending domain (both in the hash), and the quotas.

import { get } from "/ui/api.js";
import { h, svg } from "/ui/dom.js";
import { PERIODS, dayLabel, labelled, overviewHash, overviewState, rates, totals } from "/ui/overview.js";
import { form, input, shell } from "/ui/ui.js";

/** Per day, a bar of what was sent and beside it one of the outcomes (delivered, then bounced
 *  or complained on top). A day with any mail has a visible bar however small beside the busiest
 *  day; a day without has none. The chart takes its card's width; on a phone a month's chart
 *  scrolls sideways in its own box rather than shrink its labels past reading. */
function chart(days) {
  const width = 720, height = 220, pad = 32;
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
  // Each label centred under its day, none past the chart's right edge (today's, on a month).
  const ticks = labelled(days.length, days.length > 7 ? 6 : 7).map((i) => svg("text", {
    x: Math.min(pad + i * step + step * 0.48, width - 30), y: height - 10, class: "tick", "text-anchor": "middle" },
  dayLabel(days[i].day)));
  // Focusable: a month's chart scrolls in its box on a phone, by the keyboard too.
  const box = h("div.chart-box", { class: days.length > 7 ? "month" : "week", tabindex: "0" });
  box.append(svg("svg", {
    viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart days",
    "aria-label": `Sends and outcomes per day over ${days.length} days` },
  svg("line", { x1: pad, y1: base, x2: width, y2: base, class: "axis" }),
  svg("text", { x: 0, y: pad - 6, class: "tick" }, String(max)), ticks, bars));
  return box;
}

function meter(label, used, limit) {
  return h("div.meter",
    h("div.meter-label", h("span", label), h("span", `${used.toLocaleString()} / ${limit.toLocaleString()}`)),
    h("progress", { max: limit, value: Math.min(used, limit), "aria-label": `${label}: ${used} of ${limit}` }));
}

/** The period's links (7 or 30 days) and the sending domain's field, both kept in the hash. */
function controls(state, domains) {
  const periods = h("div.chips", { role: "group", "aria-label": "Period" }, PERIODS.map((days) => h("a.chip-link", {
    href: overviewHash({ ...state, days }), "aria-current": days === state.days ? "true" : null }, `${days} days`)));
  const narrow = form(async (data) => {
    location.hash = overviewHash({ ...state, domain: String(data.get("domain") || "").trim().toLowerCase() });
  }, h("div.inline.filters",
    h("div.field", h("label", { for: "overview-domain" }, "Sending domain"),
      input("domain", { id: "overview-domain", value: state.domain, list: "overview-domains", placeholder: "All domains",
        spellcheck: "false" })),
    h("datalist#overview-domains", { id: "overview-domains" }, domains.map((d) => h("option", { value: d }))),
    h("button.secondary", { type: "submit" }, "Show")));
  return h("div.overview-controls", periods, narrow);
}

async function overviewPage(query) {
  const state = overviewState(query);
  const args = new URLSearchParams({ days: String(state.days) });
  if (state.domain) args.set("domain", state.domain);
  const [stats, domains] = await Promise.all([get(`/dashboard/stats?${args}`), get("/dashboard/domains")]);
  const sums = totals(stats.days);
  const shares = rates(sums);
  const period = `${state.days} days`;
  const figure = (value, label, title) => h("div.card.stat", { title }, h("span.stat-value", value), h("span.muted", label));
  return shell("#/",
    h("h1", "Overview"), controls(state, domains.data.map((d) => d.name)),
    state.domain ? h("p.muted", `The mail sent from ${state.domain}.`) : null,
    h("section.cards", { "aria-label": "Totals" }, ...Object.entries(sums).map(([k, v]) => figure(String(v), `${k} (${period})`))),
    h("section.cards.rates", { "aria-label": "Rates" },
      figure(shares.delivered, "delivered rate", "Delivered of sent"),
      figure(shares.bounced, "bounce rate", "Bounced of sent"),
      figure(shares.complained, "complaint rate", "Complained of sent")),
    h("section.card", h("h2", "Sends and outcomes per day"), chart(stats.days),
      h("p.legend", h("span.key.k-sent", "sent"), h("span.key.k-delivered", "delivered"), h("span.key.k-failed", "bounced or complained"))),
    h("section.card", h("h2", "Quota"),
      meter("Today", stats.usage.day, stats.usage.daily_quota),
      meter("This month", stats.usage.month, stats.usage.monthly_quota)));
}

export const nav = ["#/", "Overview"];
export const routes = [[/^#\/?(?:\?(.*))?$/, (m) => overviewPage(m[1] || "")]];
