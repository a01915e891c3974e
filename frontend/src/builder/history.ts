// Undo/redo over immutable values: every change is one entry unless it shares a coalesce key with the last.

/** Undo history of immutable snapshots. ``limit`` bounds the past (oldest entries are dropped). */
export interface History<T> {
  readonly past: readonly T[];
  readonly present: T;
  readonly future: readonly T[];
  /** Changes with the same key in a row (typing in one field, dragging one node) form one undo step. */
  readonly lastKey: string | null;
}

export const HISTORY_LIMIT = 200;

export function historyOf<T>(present: T): History<T> {
  return { past: [], present, future: [], lastKey: null };
}

/**
 * Record ``next`` as the new present. Same object as the present: nothing changes.
 * With ``coalesceKey`` equal to the previous change's key, the previous undo entry is reused.
 */
export function historyPush<T>(h: History<T>, next: T, coalesceKey: string | null = null, limit = HISTORY_LIMIT): History<T> {
  if (Object.is(next, h.present)) return h;
  if (coalesceKey !== null && coalesceKey === h.lastKey) {
    return { past: h.past, present: next, future: [], lastKey: coalesceKey };
  }
  const past = [...h.past, h.present];
  if (past.length > limit) past.splice(0, past.length - limit);
  return { past, present: next, future: [], lastKey: coalesceKey };
}

export function historyUndo<T>(h: History<T>): History<T> {
  const previous = h.past[h.past.length - 1];
  if (h.past.length === 0) return h;
  return { past: h.past.slice(0, -1), present: previous as T, future: [h.present, ...h.future], lastKey: null };
}

export function historyRedo<T>(h: History<T>): History<T> {
  if (h.future.length === 0) return h;
  const [next, ...rest] = h.future;
  return { past: [...h.past, h.present], present: next as T, future: rest, lastKey: null };
}

/** Replace the present without an undo entry (e.g. the server's copy after a save). */
export function historyReset<T>(h: History<T>, present: T): History<T> {
  return { ...h, present, lastKey: null };
}
