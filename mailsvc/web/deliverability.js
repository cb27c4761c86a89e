// Deliverability (issue 23) on the domain page: what receivers' DMARC aggregate reports say
// of the domain's mail over 30 days (sources, volumes, DKIM and SPF alignment pass rates per day).

import { get } from "/ui/api.js";
import { h, table } from "/ui/dom.js";

const percent = (rate) => (rate === null || rate === undefined ? "—" : `${Math.round(rate * 1000) / 10} %`);

/** A card filled once the summary is read (the page shows first). */
export function dmarcCard(domainPath) {
  const body = h("div", { "aria-live": "polite" }, h("p.muted", "Reading the reports…"));
  get(`${domainPath}/dmarc`).then((summary) => {
    if (!summary.data.length) {
      body.replaceChildren(h("p.muted", "No DMARC aggregate report received in the last 30 days."));
      return;
    }
    const rows = [];
    for (const day of summary.data) {
      rows.push(h("tr.day", h("td", h("strong", day.date)), h("td", "all sources"), h("td", String(day.messages)),
        h("td", percent(day.dkim_pass_rate)), h("td", percent(day.spf_pass_rate)), h("td", "")));
      for (const s of day.sources) {
        rows.push(h("tr", h("td", ""), h("td", h("code", s.source_ip)), h("td", String(s.messages)),
          h("td", percent(s.dkim_pass_rate)), h("td", percent(s.spf_pass_rate)), h("td", s.reporters.join(", "))));
      }
    }
    body.replaceChildren(table(["Day", "Source", "Messages", "DKIM aligned", "SPF aligned", "Reported by"], rows));
  }).catch(() => body.replaceChildren(h("p.muted", "The DMARC summary is unavailable.")));
  return h("section.card", { id: "dmarc" }, h("h2", "DMARC reports"), body);
}
