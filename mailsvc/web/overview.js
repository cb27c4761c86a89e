// The overview's figures: a period's totals, its rates and which days the chart names. No DOM
// here (tests/web/ runs it under node).

/** The periods the overview offers, in days. */
export const PERIODS = [7, 30];
const DOMAIN = /^[a-z0-9.-]{1,253}$/;

/** The overview's state a hash's query says ("days=7&domain=example.com"): 30 days unless 7
 *  is asked for, a domain only if it is a name (lower case). */
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
