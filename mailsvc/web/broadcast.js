// A broadcast's progress: figures ("120 / 500 written") only once it is being sent, before that
// what it is in words (a draft is a draft, not "0 / 0 written"). No DOM here (tests/web/ runs it
// under node).

/** What a broadcast with nothing written says in place of figures, by its status. */
export const BEFORE_SENDING = {
  draft: "A draft: nothing is sent until you send it or schedule it (Send, below).",
  scheduled: "Scheduled: nothing is sent before its time.",
  canceled: "Canceled before anything was sent.",
  failed: "It failed before anything was sent.",
};

/** The broadcast's progress: ``{ words }`` before it is sent, else ``{ done, total, pct, text }``. */
export function progressOf(b) {
  const total = b.progress ? b.progress.total : b.recipients || 0;
  const done = b.progress ? b.progress.done : b.status === "sent" ? total : 0;
  const started = ["queued", "sending", "sent"].includes(b.status) || done > 0;
  if (!started) return { words: BEFORE_SENDING[b.status] || "Nothing sent yet." };
  const pct = total ? Math.floor((done / total) * 100) : b.status === "sent" ? 100 : 0;
  return { done, total, pct, text: `${done.toLocaleString("en")} / ${total.toLocaleString("en")} written (${pct} %)` };
}
