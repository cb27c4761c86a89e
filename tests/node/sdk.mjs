// Drives the pinned `resend` npm SDK for tests/system/test_sdk_node.py.
//
//   node sdk.mjs '<steps as JSON>'
//
// The API key comes from RESEND_API_KEY and the service's address from RESEND_BASE_URL, both
// read by the SDK itself. Each step is {"op": "send" | "batch", "payload": ..., "options": ...},
// or {"op": "<resource>.<method>", "args": [...]} for resend.<resource>.<method>(...args), the
// resource possibly nested ("contacts.segments.add");
// an attachment `content` written as {"$buffer": "<base64>"} becomes a Node Buffer first (what
// an application passes). Prints one JSON array: the SDK's {data, error} for every step.
import { Resend } from "resend";

function revive(value) {
  if (Array.isArray(value)) return value.map(revive);
  if (value !== null && typeof value === "object") {
    if (typeof value.$buffer === "string") return Buffer.from(value.$buffer, "base64");
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, revive(v)]));
  }
  return value;
}

const steps = revive(JSON.parse(process.argv[2]));
const resend = new Resend();
const results = [];
for (const step of steps) {
  let result;
  if (step.op === "send") {
    result = await resend.emails.send(step.payload, step.options);
  } else if (step.op === "batch") {
    result = await resend.batch.send(step.payload, step.options);
  } else if (step.op.includes(".")) {
    const path = step.op.split(".");
    const method = path.pop();
    const target = path.reduce((object, name) => object[name], resend);
    result = await target[method](...step.args);
  } else {
    throw new Error(`unknown step ${step.op}`);
  }
  results.push({ data: result.data, error: result.error });
}
process.stdout.write(JSON.stringify(results));
