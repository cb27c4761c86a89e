// The overview's figures: a period's totals, its rates, the chart's axes and a day in words,
// and the reputation guard's lines in words. No DOM here (tests/web/ runs it under node).

/** The periods the overview offers, in days. */
export const PERIODS = [7, 30, 90];
const DOMAIN = /^[a-z0-9.-]{1,253}$/;

/** The overview's state a hash's query says ("days=7&domain=example.com"): 30 days unless 7
 *  or 90 is asked for, a domain only if it is a name (lower case). */
export function overviewState(query) {
  const params = new URLSearchParams(query || "");
  const days = Number(params.get("days"));
  const domain = (params.get("domain") || "").trim().toLowerCase();
  return { days: PERIODS.includes(days) ? days : 30, domain: DOMAIN.test(domain) ? domain : "" };
}

/** The hash of ``state`` ("#/" for the last 30 days of every domain). */
export function overviewHash(state) {
  const params = new URLSearchParams();
  if (state.days !== 30) params.set("days", String(state.days));
  if (state.domain) params.set("domain", state.domain);
  const shown = params.toString();
  return shown ? `#/?${shown}` : "#/";
}

/** The days' sums: sent, delivered, bounced, complained. */
export function totals(days) {
  return days.reduce((t, d) => ({ sent: t.sent + d.sent, delivered: t.delivered + d.delivered,
    bounced: t.bounced + d.bounced, complained: t.complained + d.complained }), { sent: 0, delivered: 0, bounced: 0, complained: 0 });
}

/** Delivered, bounced and complained as shares of what was sent, in words ("98.5 %"; "—" when
 *  nothing was sent); a share over 0 and under 0.1 % reads "< 0.1 %", not "0 %". */
export function rates(sums) {
  const share = (n) => {
    if (!sums.sent) return "—";
    const pct = (100 * n) / sums.sent;
    return pct > 0 && pct < 0.1 ? "< 0.1 %" : `${Math.round(pct * 10) / 10} %`;
  };
  return { delivered: share(sums.delivered), bounced: share(sums.bounced), complained: share(sums.complained) };
}

/** The indexes of the days the chart's axis names: at most ``most`` of them, evenly spaced, the
 *  last day (today) always among them. */
export function labelled(count, most) {
  if (count <= 0) return [];
  const step = Math.max(1, Math.ceil(count / most));
  const out = [];
  for (let i = count - 1; i >= 0; i -= step) out.unshift(i);
  return out;
}

/** A day ("2026-12-02") as the axis names it: "2 Dec". */
export function dayLabel(day) {
  const [, month, date] = day.split("-").map(Number);
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  return `${date} ${MONTHS[month - 1] || ""}`.trim();
}

/** A count as the page shows it: "1,234". */
export function count(n) {
  return n.toLocaleString("en-GB");
}

/** A day's figures in words: "2 Dec: 12 sent, 11 delivered, 1 bounced, 0 complained". */
export function dayText(d) {
  return `${dayLabel(d.day)}: ${count(d.sent)} sent, ${count(d.delivered)} delivered, ${count(d.bounced)} bounced,`
    + ` ${count(d.complained)} complained`;
}

/** The y-axis of a chart whose tallest bar is ``max``: a few round values from 0 (at most
 *  ``most`` steps of 1, 2 or 5 times a power of ten, whole numbers), the last at or over ``max``. */
export function yTicks(max, most = 4) {
  const raw = Math.max(1, max) / most;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw));
  const top = Math.ceil(Math.max(1, max) / step) * step;
  const out = [];
  for (let v = 0; v <= top; v += step) out.push(v);
  return out;
}

/** A y-axis value as it is written: "1,500", "25k" from 10,000 on. */
export function tickText(v) {
  return v >= 10000 && v % 1000 === 0 ? `${v / 1000}k` : count(v);
}

/** A share (0.012) as a percentage in words: "1.2 %", "0.05 %" under 1 %, "< 0.01 %" above 0. */
export function percent(share) {
  const pct = 100 * share;
  if (pct > 0 && pct < 0.01) return "< 0.01 %";
  return `${Number(pct.toFixed(pct < 1 ? 2 : 1))} %`;
}

/** How far the guard's meter reaches: its line stands at two thirds of it. */
const METER_REACH = 1.5;
const GUARD_WORDS = {
  bounce: { label: "Bounces", judged: "messages judged (delivered or bounced)", counted: "bounced", few: "messages",
    from: "of them" },
  complaint: { label: "Complaints", judged: "delivered", counted: "complained", few: "delivered messages",
    from: "delivered" },
};

/** One of the reputation guard's lines (``name``: "bounce" or "complaint"; ``line``: the stats
 *  answer's ``guard[name]``, as the guard judges it) in words and as a meter: ``state`` is
 *  "unjudged" (too few messages for the line to apply), "ok", "near" (at three quarters of the
 *  line or more) or "over"; ``fill`` and ``mark`` are the rate's and the line's places on the
 *  meter (0 to 1). */
export function guardLine(name, line, days) {
  const words = GUARD_WORDS[name];
  const rate = line.rate ?? 0;
  let state = "ok";
  if (!line.counts) state = "unjudged";
  else if (line.over) state = "over";
  else if (rate >= 0.75 * line.limit) state = "near";
  const limit = percent(line.limit);
  const headline = {
    unjudged: `${words.label}: too few ${words.few} yet to be judged: ${count(line.judged)} of ${count(line.minimum)}`,
    ok: `${words.label} ${percent(rate)} of ${limit} — sending pauses above it`,
    near: `${words.label} ${percent(rate)} of ${limit} — close to the line: sending pauses above it`,
    over: `${words.label} ${percent(rate)}, over ${limit} — sending pauses`,
  }[state];
  const detail = `${count(line.count)} ${words.counted} of ${count(line.judged)} ${words.judged} in the last ${days} days;`
    + ` the line applies from ${count(line.minimum)} ${words.from}.`;
  return { name, state, headline, detail, fill: Math.min(1, rate / (METER_REACH * line.limit)), mark: 1 / METER_REACH };
}
