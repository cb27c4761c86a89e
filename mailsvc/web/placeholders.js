// The broadcast editor's placeholder menu: what it offers and how a choice goes into the HTML.
// No DOM here (tests/web/ runs it under node).

export const PLACEHOLDERS = [
  ["{{{FIRST_NAME|there}}}", "First name (fallback “there”)"], ["{{{LAST_NAME}}}", "Last name"], ["{{{EMAIL}}}", "E-mail address"],
  ["{{{contact.PROPERTY}}}", "A contact property"], ["{{{RESEND_UNSUBSCRIBE_URL}}}", "Unsubscribe link"],
];

/** ``text`` put in place of value[start, end) (the selection; at the end when there is none):
 *  {value, caret}, the caret just after the inserted text. */
export function insertPlaceholder(value, start, end, text) {
  const from = Number.isInteger(start) ? Math.max(0, Math.min(start, value.length)) : value.length;
  const to = Number.isInteger(end) ? Math.max(from, Math.min(end, value.length)) : from;
  return { value: value.slice(0, from) + text + value.slice(to), caret: from + text.length };
}
