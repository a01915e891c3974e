// Fields that hold typed text not yet committed to the draft (committed on blur); autosave and the leave guard count them.
import { useEffect, useSyncExternalStore } from "react";

const pending = new Set<string>();
const listeners = new Set<() => void>();

function emit() {
  for (const l of listeners) l();
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** True while any field holds an uncommitted local value (the draft is dirty though the spec is not yet). */
export function hasPendingEdits(): boolean {
  return pending.size > 0;
}

/** Re-renders on change; true while any field holds an uncommitted local value. */
export function usePendingEdits(): boolean {
  return useSyncExternalStore(subscribe, hasPendingEdits, hasPendingEdits);
}

/** Mark field ``id`` as holding an uncommitted value while ``isPending`` (cleared on unmount). */
export function usePendingEdit(id: string, isPending: boolean): void {
  useEffect(() => {
    if (!isPending) return;
    pending.add(id);
    emit();
    return () => {
      pending.delete(id);
      emit();
    };
  }, [id, isPending]);
}
