// The contacts import's CSV rules (docs/decisions.md, "CSV import"): a file's text becomes rows of
// POST /contacts/batch, each remembering the line of the file it came from, so that the batch's
// errors[].index can be told as a line number. No DOM here: only text in, plain objects out.

export const BATCH_ROWS = 1000;
// The API's write limit is 1 MiB; a batch stays well under it whatever its rows hold.
export const BATCH_BYTES = 900 * 1024;

const NAMED = {
  email: "email", email_address: "email", e_mail: "email",
  first_name: "first_name", firstname: "first_name", last_name: "last_name", lastname: "last_name",
  unsubscribed: "unsubscribed",
};
const TYPES = ["string", "number", "boolean"];
const PROPERTY = /^[A-Za-z_][A-Za-z0-9_]{0,49}$/;
const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
const TRUE = ["true", "yes", "1"];
const FALSE = ["false", "no", "0"];

export class CsvError extends Error {}

/**
 * RFC 4180 records of a text: [{line, fields}], ``line`` being the 1-based line where the record
 * starts (a quoted field may hold line breaks, so records and lines differ). Separators are
 * commas; line ends CRLF, LF or CR; a byte-order mark is dropped; blank lines are skipped.
 */
export function records(text) {
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const found = [];
  let fields = [], field = "", quoted = false, line = 1, start = 1, i = 0;
  const end = () => {
    fields.push(field);
    if (fields.length > 1 || fields[0].trim() !== "") found.push({ line: start, fields });
    fields = []; field = "";
  };
  while (i < text.length) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i += 2; continue; }
      if (c === '"') { quoted = false; i += 1; continue; }
      if (c === "\r" && text[i + 1] === "\n") { field += "\r\n"; i += 2; line += 1; continue; }
      if (c === "\n" || c === "\r") line += 1;
      field += c; i += 1; continue;
    }
    if (c === '"' && field.trim() === "") { quoted = true; field = ""; i += 1; continue; }
    if (c === ",") { fields.push(field); field = ""; i += 1; continue; }
    if (c === "\r" || c === "\n") {
      end();
      i += c === "\r" && text[i + 1] === "\n" ? 2 : 1;
      line += 1; start = line; continue;
    }
    field += c; i += 1;
  }
  if (quoted) throw new CsvError(`Line ${start}: a quoted field is not closed.`);
  if (field !== "" || fields.length) end();
  return found;
}

/** What each header cell means: {kind: "email"|"first_name"|"last_name"|"unsubscribed"|"property", key, type}. */
export function columns(header) {
  const problems = [], seen = new Set();
  const parsed = header.map((raw, i) => {
    const cell = raw.trim();
    const normal = cell.toLowerCase().replace(/[\s-]+/g, "_");
    let column;
    if (NAMED[normal]) {
      column = { kind: NAMED[normal], key: NAMED[normal] };
    } else {
      const [key, type = "string"] = cell.split(":").map((x) => x.trim());
      if (!PROPERTY.test(key)) {
        problems.push(`Column ${i + 1} (${cell || "empty"}): a property name starts with a letter or _ and holds only letters, digits and _ (at most 50).`);
      } else if (!TYPES.includes(type.toLowerCase())) {
        problems.push(`Column ${i + 1} (${cell}): the type after ":" is string, number or boolean.`);
      }
      column = { kind: "property", key, type: type.toLowerCase() };
    }
    const name = column.kind === "property" ? `properties.${column.key}` : column.kind;
    if (seen.has(name)) problems.push(`Column ${i + 1} (${cell}): named twice.`);
    seen.add(name);
    return column;
  });
  if (!seen.has("email")) problems.push("The header row has no email column.");
  if (parsed.filter((c) => c.kind === "property").length > 100) problems.push("At most 100 property columns.");
  if (problems.length) throw new CsvError(problems.join(" "));
  return parsed;
}

function flag(text) {
  const lower = text.toLowerCase();
  if (TRUE.includes(lower)) return true;
  if (FALSE.includes(lower)) return false;
  return undefined;
}

/**
 * The rows of a CSV text: {rows: [{line, email, contact}], errors: [{line, email, message}]}.
 * ``contact`` is a row of the batch; a line that cannot become one is in ``errors`` instead.
 * Cells are trimmed; an empty cell sets nothing (a re-import never clears a name or a property).
 */
export function contactsOf(text) {
  const all = records(text);
  if (!all.length) throw new CsvError("The file is empty.");
  const [head, ...body] = all;
  const cols = columns(head.fields);
  const rows = [], errors = [];
  for (const { line, fields } of body) {
    const cells = fields.map((f) => f.trim());
    const email = cells[cols.findIndex((c) => c.kind === "email")] || "";
    if (cells.length !== cols.length) {
      errors.push({ line, email, message: `${cells.length} fields; the header has ${cols.length}.` });
      continue;
    }
    const contact = {}, properties = {};
    let problem = null;
    cols.forEach((col, i) => {
      const cell = cells[i];
      if (cell === "" || problem) return;
      if (col.kind === "unsubscribed" || col.type === "boolean") {
        const value = flag(cell);
        if (value === undefined) problem = `${col.kind === "property" ? `properties.${col.key}` : col.kind}: "${cell}" is not true or false.`;
        else if (col.kind === "property") properties[col.key] = value;
        else contact.unsubscribed = value;
      } else if (col.kind === "property" && col.type === "number") {
        if (NUMBER.test(cell) && Number.isFinite(Number(cell))) properties[col.key] = Number(cell);
        else problem = `properties.${col.key}: "${cell}" is not a number.`;
      } else if (col.kind === "property") {
        properties[col.key] = cell;
      } else {
        contact[col.kind] = cell;
      }
    });
    if (problem) { errors.push({ line, email, message: problem }); continue; }
    if (Object.keys(properties).length) contact.properties = properties;
    rows.push({ line, email, contact });
  }
  return { rows, errors };
}

/** The rows in batches of at most BATCH_ROWS rows and about BATCH_BYTES of JSON. */
export function batches(rows) {
  const encoder = new TextEncoder();
  const out = [];
  let current = [], size = 0;
  for (const row of rows) {
    const bytes = encoder.encode(JSON.stringify(row.contact)).length + 1;
    if (current.length && (current.length === BATCH_ROWS || size + bytes > BATCH_BYTES)) {
      out.push(current); current = []; size = 0;
    }
    current.push(row); size += bytes;
  }
  if (current.length) out.push(current);
  return out;
}

/** A batch error's message without its "contacts[i]." prefix: the line number says which row. */
export function rowMessage(message) {
  return String(message || "").replace(/^contacts\[\d+\]\.?/, "");
}
