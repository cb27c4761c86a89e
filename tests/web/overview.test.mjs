// The overview's state in the hash, its totals, rates and the chart's labels (mailsvc/web/overview.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { dayLabel, labelled, overviewHash, overviewState, rates, totals } from "../../mailsvc/web/overview.js";

test("the period and the domain go to the hash and come back; anything else is the default", () => {
  for (const state of [{ days: 30, domain: "" }, { days: 7, domain: "" }, { days: 7, domain: "mail.example.com" }]) {
    assert.deepEqual(overviewState(overviewHash(state).split("?")[1] || ""), state);
  }
  assert.equal(overviewHash({ days: 30, domain: "" }), "#/");
  assert.deepEqual(overviewState("days=9&domain=<b>"), { days: 30, domain: "" });
  assert.deepEqual(overviewState("domain=Example.COM"), { days: 30, domain: "example.com" });
});

test("rates are shares of what was sent, told in words", () => {
  const days = [{ sent: 150, delivered: 140, bounced: 9, complained: 1 }, { sent: 50, delivered: 50, bounced: 0, complained: 0 }];
  const sums = totals(days);
  assert.deepEqual(sums, { sent: 200, delivered: 190, bounced: 9, complained: 1 });
  assert.deepEqual(rates(sums), { delivered: "95 %", bounced: "4.5 %", complained: "0.5 %" });
  assert.deepEqual(rates({ sent: 0, delivered: 0, bounced: 0, complained: 0 }), { delivered: "—", bounced: "—", complained: "—" });
  assert.equal(rates({ sent: 3000, delivered: 2999, bounced: 0, complained: 1 }).complained, "< 0.1 %");
  assert.equal(rates({ sent: 3, delivered: 1, bounced: 0, complained: 0 }).delivered, "33.3 %");
});

test("the axis names a few evenly spaced days, today always among them", () => {
  assert.deepEqual(labelled(7, 7), [0, 1, 2, 3, 4, 5, 6]);
  const month = labelled(30, 5);
  assert.ok(month.length <= 5 && month.at(-1) === 29, month);
  assert.deepEqual(month, [5, 11, 17, 23, 29]);
  assert.deepEqual(labelled(0, 5), []);
  assert.equal(dayLabel("2026-12-02"), "2 Dec");
});
