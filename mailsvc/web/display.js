// What the console shows of a text it did not write (a tenant's name, a remote MX's reply, an
// audit entry): every character that would act instead of being read is replaced by a visible
// escape, the rule of mailsvc/domain/display.py. The control characters (C0 with TAB and line
// breaks, since each value is one field; DEL; C1), the bidirectional embeddings, overrides and
// isolates and the zero-width characters, which reorder or hide what is around them (Unicode
// Technical Report #36), the line and paragraph separators, and lone surrogates. Pure: no DOM,
// so that tests/web/ runs it under node; the stored value itself is never changed.
// The dashboard's pages show every text they are given through shownText (web/dom.js): the same
// rule for text that may span lines (a message's source, a template's HTML), which keeps TAB, CR
// and LF, and keeps the zero-width joiner and non-joiner, which emoji sequences and several
// scripts need and which reorder nothing.

const NEUTRALISED_IN_TEXT = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]/gu;
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

/** ``value`` as a page shows text that may span lines (shown's rule, TAB, CR, LF and the
 *  joiners kept); null and undefined stay as they are. */
export function shownText(value) {
  if (value === null || value === undefined) return value;
  return String(value).replace(NEUTRALISED_IN_TEXT, escape);
}
