// Edit in place: a draft's fields saved by themselves a moment after the typing stops, the state
// told ("Unsaved changes", "Saving…", "Saved."), and an undo back to the previous saved value.
// No DOM here (tests/web/ drives it under node with its own timers); a page binds it to its
// form (ui.js's ``autosaved``).

/** How long after the last keystroke a change is saved. */
export const SAVE_DELAY_MS = 1000;

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** What a draft being edited is: its last saved value, the one on screen, and the saved values
 *  before it (undo's history). ``save(value)`` writes one (a promise); ``onState(state, error)``
 *  hears each change of state: "saved", "unsaved", "saving" or "failed". */
export class Autosave {
  constructor(value, save, { onState = () => {}, delay = SAVE_DELAY_MS, timers = globalThis } = {}) {
    this.saved = value;
    this.current = value;
    this.history = [];
    this.state = "saved";
    this.error = null;
    this._save = save;
    this._onState = onState;
    this._delay = delay;
    this._timers = timers;
    this._timer = null;
    this._running = null;
  }

  /** Whether what is on screen differs from what was last saved. */
  get dirty() { return !same(this.current, this.saved); }

  _tell(state, error = null) {
    this.state = state;
    this.error = error;
    this._onState(state, error);
  }

  /** The value on screen changed: saved ``delay`` after the last such change. */
  edit(value) {
    this.current = value;
    if (this._timer !== null) this._timers.clearTimeout(this._timer);
    this._timer = null;
    if (!this.dirty) { this._tell("saved"); return; }
    this._tell("unsaved");
    this._timer = this._timers.setTimeout(() => { this._timer = null; this.flush(); }, this._delay);
  }

  /** Saves what is on screen now (if it changed), after any save under way; resolves once it
   *  is saved, or with the failure told ("failed") and the change kept on screen. */
  async flush(record = true) {
    if (this._timer !== null) { this._timers.clearTimeout(this._timer); this._timer = null; }
    if (this._running) await this._running.catch(() => {});
    if (!this.dirty) { if (this.state !== "failed") this._tell("saved"); return; }
    const value = this.current, before = this.saved;
    this._tell("saving");
    this._running = Promise.resolve().then(() => this._save(value));
    try {
      await this._running;
    } catch (error) {
      this._tell("failed", error);
      return;
    } finally {
      this._running = null;
    }
    if (record) this.history.push(before);
    this.saved = value;
    if (this.dirty) this.edit(this.current); else this._tell("saved");
  }

  /** Back one step: unsaved changes are dropped (the last saved value again); with none, the
   *  saved value before the last is restored and saved. The value to show, or null when there
   *  is nothing to undo. */
  async undo() {
    if (this._timer !== null) { this._timers.clearTimeout(this._timer); this._timer = null; }
    if (this.dirty) {
      this.current = this.saved;
      this._tell("saved");
      return this.saved;
    }
    if (!this.history.length) return null;
    this.current = this.history.pop();
    const shown = this.current;
    await this.flush(false);
    return shown;
  }
}

/** A field of addresses separated by commas ("a@x.com, b@y.com") as the API's list. */
export function addressList(raw) {
  return String(raw || "").split(",").map((a) => a.trim()).filter(Boolean);
}

/** The words of a state, for the status line beside the form. */
export function stateWords(state) {
  return { saved: "Saved.", unsaved: "Unsaved changes…", saving: "Saving…", failed: "Not saved:" }[state] || "";
}
