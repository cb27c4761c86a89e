// What the console shows of a text it did not write (a tenant's name, a remote MX's reply, an
// audit entry): every character that would act instead of being read is replaced by a visible
// escape, the rule of mailsvc/domain/display.py. The control characters (C0 with TAB and line
// breaks, since each value is one field; DEL; C1), the bidirectional embeddings, overrides and
// isolates and the zero-width characters, which reorder or hide what is around them (Unicode
// Technical Report #36), the line and paragraph separators, and lone surrogates. Pure: no DOM,
// so that tests/web/ runs it under node; the stored value itself is never changed.

const NEUTRALISED = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]/gu;

function escape(character) {
  const point = character.codePointAt(0);
  return point <= 0xff ? `\\x${point.toString(16).padStart(2, "0")}` : `\\u${point.toString(16).padStart(4, "0")}`;
}

/** ``value`` as text shown on one line as it reads (``\x1b``, ``\u202e`` for what would act);
 *  null and undefined stay as they are, for the caller's "—". */
export function shown(value) {
  if (value === null || value === undefined) return value;
  return String(value).replace(NEUTRALISED, escape);
}
