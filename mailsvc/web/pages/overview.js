// The overview: a period's (7, 30 or 90 days) sends and outcomes, per day, with their rates, of
// the account or of one sending domain (both in the hash), the account's pause lines and the quotas.

import { get } from "/ui/api.js";
import { h, svg, table } from "/ui/dom.js";
import {
  PERIODS, count, dayLabel, dayText, guardLine, labelled, overviewHash, overviewState, rates, tickText, totals, yTicks,
} from "/ui/overview.js";
import { form, input, shell } from "/ui/ui.js";

const CHART = { width: 720, height: 240, bottom: 30, top: 12 };

/** Per day, a bar of what was sent and beside it one of the outcomes (delivered, then bounced
 *  or complained on top), over a y-axis of a few round values. A day with any mail has a
 *  visible bar however small beside the busiest day; a day without has none. A day's figures
 *  show in the readout below the chart as the pointer passes over it, when it is tapped, and
 *  by the arrow keys (the chart is focusable); each day's <title> tells them on hover too. The
 *  chart takes its card's width; on a phone a month's or a quarter's chart scrolls sideways in
 *  its own box rather than shrink its labels past reading. */
function chart(days) {
  const { width, height, bottom, top } = CHART;
  const ticks = yTicks(Math.max(...days.map((d) => Math.max(d.sent, d.delivered + d.bounced + d.complained))));
  const left = 24 + 9 * Math.max(3, ...ticks.map((v) => tickText(v).length)); // room for the longest value
  const most = ticks.at(-1);
  const step = (width - left) / days.length;
  const base = height - bottom;
  const y = (v) => base - (v / most) * (base - top);
  const tall = (v) => (v > 0 ? Math.max(3, base - y(v)) : 0);
  const bar = (x, at, size, cls) => (size > 0 ? [svg("rect", { x, y: at - size, width: step * 0.42, height: size, class: cls })] : []);
  const readout = h("p.readout", { "aria-live": "polite" });
  const columns = days.map((d, i) => {
    const x = left + i * step;
    const delivered = tall(d.delivered);
    const failed = tall(d.delivered + d.bounced + d.complained) - delivered;
    return svg("g", { class: "day" },
      svg("title", {}, dayText(d)),
      svg("rect", { x, y: top, width: step, height: base - top, class: "day-hit" }),
      ...bar(x + step * 0.06, base, tall(d.sent), "bar-sent"),
      ...bar(x + step * 0.5, base, delivered, "bar-delivered"),
      ...bar(x + step * 0.5, base - delivered, d.bounced + d.complained > 0 ? Math.max(3, failed) : 0, "bar-failed"));
  });
  let chosen = days.length - 1;
  const choose = (i) => {
    chosen = Math.max(0, Math.min(days.length - 1, i));
    columns.forEach((g, n) => g.classList.toggle("chosen", n === chosen));
    readout.textContent = dayText(days[chosen]);
  };
  columns.forEach((g, i) => {
    g.addEventListener("pointerenter", () => choose(i));
    g.addEventListener("click", () => choose(i));
  });
  const value = (v) => svg("text", { x: left - 8, y: y(v) + 5, class: "tick", "text-anchor": "end" }, tickText(v));
  const grid = ticks.map((v) => [svg("line", { x1: left, y1: y(v), x2: width, y2: y(v), class: v ? "grid" : "axis" }), value(v)]);
  // Each label centred under its day, none past the chart's right edge (today's, on a month).
  const labels = labelled(days.length, days.length > 7 ? 6 : 7).map((i) => svg("text", {
    x: Math.min(left + i * step + step * 0.48, width - 30), y: height - 8, class: "tick", "text-anchor": "middle" },
  dayLabel(days[i].day)));
  const size = { 7: "week", 30: "month" }[days.length] || "quarter";
  const box = h("div.chart-box", {
    class: size, tabindex: "0", role: "group",
    "aria-label": `Sends and outcomes per day over ${days.length} days: the arrow keys choose a day` });
  box.addEventListener("keydown", (event) => {
    const to = { ArrowLeft: chosen - 1, ArrowRight: chosen + 1, Home: 0, End: days.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    choose(to);
    columns[chosen].scrollIntoView({ block: "nearest", inline: "nearest" });
  });
  box.append(svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart days", "aria-hidden": "true" },
    grid, labels, columns));
  // The y-axis again, over the box's left edge where the chart scrolls (a phone): in view
  // whichever days are; as wide as the chart, so drawn to its scale (style.css).
  const axis = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: `y-axis ${size}`, "aria-hidden": "true" },
    svg("rect", { x: 0, y: 0, width: left, height, class: "y-axis-back" }), ticks.map(value));
  choose(chosen);
  return [h("div.chart-frame", box, axis), readout];
}

/** The days' figures as a table, for whoever reads them rather than looks (a screen reader,
 *  or a copy into a sheet): closed until asked for. */
function daysTable(days) {
  const rows = days.map((d) => h("tr", h("th", { scope: "row" }, d.day),
    [d.sent, d.delivered, d.bounced, d.complained].map((n) => h("td.num", count(n)))));
  return h("details.days-table", h("summary", "The days as a table"),
    table(["Day", "Sent", "Delivered", "Bounced", "Complained"], rows, `Sends and outcomes per day over ${days.length} days`));
}

/** The reputation guard's lines for the account, as the guard judges it now (the stats
 *  answer's ``guard``): each rate in words and on a meter whose mark is the line. */
function guardCard(guard) {
  const line = (name) => {
    const g = guardLine(name, guard[name], guard.days);
    const reach = 300;
    return h("div.guard-line", { class: `guard-${g.state}` },
      h("p.guard-headline", g.headline),
      svg("svg", { viewBox: `0 0 ${reach} 14`, preserveAspectRatio: "none", class: "guard-meter", "aria-hidden": "true" },
        svg("rect", { x: 0, y: 2, width: reach, height: 10, rx: 5, class: "guard-track" }),
        svg("rect", { x: 0, y: 2, width: g.fill * reach, height: 10, rx: 5, class: "guard-fill" }),
        svg("line", { x1: g.mark * reach, y1: 0, x2: g.mark * reach, y2: 14, class: "guard-mark",
          "vector-effect": "non-scaling-stroke" })),
      h("p.muted.guard-detail", g.detail));
  };
  return h("section.card.guard", h("h2", "Pause lines"),
    h("p.muted", `The whole account's last ${guard.days} days, as the reputation guard judges them: sending pauses`
      + " when a rate goes over its line. Mail to test addresses or kept in capture mode is left out, as the guard"
      + " leaves it out."),
    line("bounce"), line("complaint"));
}

function meter(label, used, limit) {
  return h("div.meter",
    h("div.meter-label", h("span", label), h("span", `${used.toLocaleString()} / ${limit.toLocaleString()}`)),
    h("progress", { max: limit, value: Math.min(used, limit), "aria-label": `${label}: ${used} of ${limit}` }));
}

/** The period's links (7, 30 or 90 days) and the sending domain's field, both kept in the hash. */
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
    h("section.cards", { "aria-label": "Totals" }, ...Object.entries(sums).map(([k, v]) => figure(count(v), `${k} (${period})`))),
    h("section.cards.rates", { "aria-label": "Rates" },
      figure(shares.delivered, "delivered rate", "Delivered of sent"),
      figure(shares.bounced, "bounce rate", "Bounced of sent"),
      figure(shares.complained, "complaint rate", "Complained of sent")),
    guardCard(stats.guard),
    h("section.card", h("h2", "Sends and outcomes per day"), ...chart(stats.days),
      h("p.legend", h("span.key.k-sent", "sent"), h("span.key.k-delivered", "delivered"), h("span.key.k-failed", "bounced or complained")),
      daysTable(stats.days)),
    h("section.card", h("h2", "Quota"),
      meter("Today", stats.usage.day, stats.usage.daily_quota),
      meter("This month", stats.usage.month, stats.usage.monthly_quota)));
}

export const nav = ["#/", "Overview"];
export const routes = [[/^#\/?(?:\?(.*))?$/, (m) => overviewPage(m[1] || "")]];
