// The overview's state in the hash, its totals, rates and the chart's labels (mailsvc/web/overview.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  dayLabel, dayText, guardLine, labelled, overviewHash, overviewState, percent, rates, tickText, totals, yTicks,
} from "../../mailsvc/web/overview.js";

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

test("ninety days is a period too", () => {
  assert.deepEqual(overviewState("days=90"), { days: 90, domain: "" });
  assert.equal(overviewHash({ days: 90, domain: "" }), "#/?days=90");
});

test("the y-axis climbs in round steps from 0 to at least the tallest bar", () => {
  assert.deepEqual(yTicks(0), [0, 1]);
  assert.deepEqual(yTicks(3), [0, 1, 2, 3]);
  assert.deepEqual(yTicks(7), [0, 2, 4, 6, 8]);
  assert.deepEqual(yTicks(1234), [0, 500, 1000, 1500]);
  for (const max of [1, 9, 10, 11, 99, 101, 4999, 123456]) {
    const ticks = yTicks(max);
    assert.ok(ticks.at(-1) >= max && ticks.length <= 6 && ticks.every(Number.isInteger), `${max}: ${ticks}`);
  }
  assert.equal(tickText(1500), "1,500");
  assert.equal(tickText(25000), "25k");
});

test("a day reads in words", () => {
  assert.equal(dayText({ day: "2026-12-02", sent: 1200, delivered: 1180, bounced: 15, complained: 1 }),
    "2 Dec: 1,200 sent, 1,180 delivered, 15 bounced, 1 complained");
});

test("percentages keep what matters beside a line of 4 % or of 0.1 %", () => {
  assert.equal(percent(0.04), "4 %");
  assert.equal(percent(0.001), "0.1 %");
  assert.equal(percent(0.0123), "1.2 %");
  assert.equal(percent(0.00051), "0.05 %");
  assert.equal(percent(0.00001), "< 0.01 %");
  assert.equal(percent(0), "0 %");
});

const line = (fields) => ({ count: 0, judged: 0, rate: null, limit: 0.04, minimum: 200, counts: false, over: false, ...fields });

test("a pause line with too few messages says how many are still to come", () => {
  const g = guardLine("bounce", line({ count: 2, judged: 57, rate: 2 / 57 }), 7);
  assert.equal(g.state, "unjudged");
  assert.equal(g.headline, "Bounces: too few messages yet to be judged: 57 of 200");
  assert.equal(g.detail, "2 bounced of 57 messages judged (delivered or bounced) in the last 7 days; the line applies from 200 of them.");
  const none = guardLine("complaint", line({ limit: 0.001, minimum: 1000 }), 7);
  assert.equal(none.headline, "Complaints: too few delivered messages yet to be judged: 0 of 1,000");
  assert.equal(none.fill, 0);
});

test("a judged line tells the rate against the line, how close, and when it is over", () => {
  const ok = guardLine("bounce", line({ count: 12, judged: 1000, rate: 0.012, counts: true }), 7);
  assert.equal(ok.state, "ok");
  assert.equal(ok.headline, "Bounces 1.2 % of 4 % — sending pauses above it");
  assert.ok(Math.abs(ok.fill - 0.012 / 0.06) < 1e-9 && ok.mark > ok.fill);
  const near = guardLine("bounce", line({ count: 35, judged: 1000, rate: 0.035, counts: true }), 7);
  assert.equal(near.state, "near");
  assert.match(near.headline, /^Bounces 3.5 % of 4 % — close to the line/);
  const over = guardLine("complaint", line({ count: 3, judged: 1500, rate: 0.002, limit: 0.001, minimum: 1000,
    counts: true, over: true }), 7);
  assert.equal(over.state, "over");
  assert.equal(over.headline, "Complaints 0.2 %, over 0.1 % — sending pauses");
  assert.equal(over.fill, 1);
  assert.match(over.detail, /3 complained of 1,500 delivered in the last 7 days; the line applies from 1,000 delivered\./);
});
