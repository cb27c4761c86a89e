// The account's activity in words (mailsvc/web/activity.js), under node.
import assert from "node:assert/strict";
import { test } from "node:test";

import { KINDS, rawCode, sentence, who } from "../../mailsvc/web/activity.js";

const ana = { type: "user", id: "u1", email: "ana@acme.test", removed: false };

test("each kind of action is a sentence in words", () => {
  const said = (action, detail, actor = ana) => sentence({ action, detail, actor });
  assert.equal(said("api_key.create", { name: "ci" }), "ana@acme.test made the key 'ci'");
  assert.equal(said("api_key.revoke", { name: "ci", prefix: "re_abc" }), "ana@acme.test revoked the key 'ci'");
  assert.equal(said("domain.create", { domain: "acme.test" }), "ana@acme.test added the domain acme.test");
  assert.equal(said("domain.delete", { domain: "acme.test" }), "ana@acme.test removed the domain acme.test");
  assert.equal(said("domain.check", { domain: "acme.test" }),
    "ana@acme.test asked for a check of the domain acme.test's DNS records");
  assert.equal(said("domain.verified", { domain: "acme.test" }, { type: "system" }), "The domain acme.test was verified");
  assert.equal(said("domain.failed", { domain: "acme.test", reason: "the name is reserved" }, { type: "system" }),
    "The domain acme.test failed verification: the name is reserved");
  assert.equal(said("domain.failed", { domain: "acme.test" }, { type: "system" }), "The domain acme.test failed verification");
  assert.equal(said("user.link", { email: "bo@acme.test", invited: true, role: "member" }),
    "ana@acme.test invited bo@acme.test as a member");
  assert.equal(said("user.link", { email: "bo@acme.test", invited: true, role: "owner" }),
    "ana@acme.test invited bo@acme.test as an owner");
  assert.equal(said("user.link", { email: "bo@acme.test" }), "ana@acme.test made a set-password link for bo@acme.test");
  assert.equal(said("user.remove", { email: "bo@acme.test", revoked_keys: [] }), "ana@acme.test removed bo@acme.test from the account");
  assert.equal(said("user.remove", { email: "bo@acme.test", revoked_keys: [{}, {}] }),
    "ana@acme.test removed bo@acme.test from the account and revoked 2 keys they made");
  assert.equal(said("user.remove", { email: "bo@acme.test", revoked_keys: [{}] }),
    "ana@acme.test removed bo@acme.test from the account and revoked 1 key they made");
  assert.equal(said("user.sign_in", { client: "127.0.0.1" }), "ana@acme.test signed in");
  assert.equal(said("user.two_factor_reset", { email: "bo@acme.test" }, { type: "operator", name: "operator" }),
    "The operator turned off two-factor sign-in for bo@acme.test");
  assert.equal(said("tenant.create", { name: "Acme" }, { type: "operator", name: "operator" }),
    "The operator created the account 'Acme'");
  assert.equal(said("tenant.update", { changes: { daily_quota: 9, plan: "scale" } }, { type: "operator", name: "o@ops.test" }),
    "The operator o@ops.test changed the account's settings (daily_quota, plan)");
  const retried = { webhook_id: "wh_1", event_id: "evt_9", tenant_id: "t1" };
  assert.equal(said("webhook_delivery.retry", { ...retried, was: "failed", attempts: 3 }),
    "ana@acme.test retried the delivery of event evt_9 to webhook wh_1 (it had failed after 3 attempts)");
  assert.equal(said("webhook_delivery.retry", { ...retried, was: "pending", attempts: 1 }),
    "ana@acme.test retried the delivery of event evt_9 to webhook wh_1 (it was still pending after 1 attempt)");
  assert.equal(said("webhook_delivery.retry", { ...retried, was: "pending", attempts: 0 }),
    "ana@acme.test retried the delivery of event evt_9 to webhook wh_1 (no attempt had been made yet)");
  assert.equal(said("webhook_delivery.retry", {}), "ana@acme.test retried a webhook delivery");
});

test("an action not known is told plainly: who, then its code", () => {
  assert.equal(sentence({ action: "queue.hold", detail: {}, actor: { type: "operator", name: "bob" } }), "The operator bob: queue.hold");
  assert.equal(sentence({ action: "", actor: ana }), "ana@acme.test: (no action)");
});

test("who acted: a member (removed or not), an API key (revoked or not), an operator, the service", () => {
  assert.equal(who(ana), "ana@acme.test");
  assert.equal(who({ type: "user", id: "u2", email: null, removed: true }), "A removed member");
  assert.equal(who({ type: "api_key", id: "k", name: "deploy", removed: false }), "The API key 'deploy'");
  assert.equal(who({ type: "api_key", id: "k", name: null, removed: true }), "A revoked API key");
  assert.equal(who({ type: "operator", name: "operator" }), "The operator");
  assert.equal(who({ type: "system" }), "mailsvc");
  assert.equal(who(undefined), "Someone");
  assert.equal(sentence({ action: "api_key.create", detail: { name: "ci" }, actor: { type: "api_key", name: "Default" } }),
    "The API key 'Default' made the key 'ci'");
});

test("the raw code is the action and its detail as kept", () => {
  assert.equal(rawCode({ action: "api_key.revoke", detail: { name: "ci", prefix: "re_abc" } }),
    'api_key.revoke {"name":"ci","prefix":"re_abc"}');
  assert.equal(rawCode({ action: "user.sign_in", detail: {} }), "user.sign_in");
});

test("the kinds are the API's, all first", () => {
  assert.deepEqual(KINDS.map(([code]) => code), ["", "api_keys", "domains", "members", "sign_ins", "webhooks", "account"]);
});
