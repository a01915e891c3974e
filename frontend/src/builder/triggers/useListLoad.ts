// The Triggers panel's list loading: one GET of a list, its loading / failed / ready state, and a reload (webhooks and schedules).
import { useCallback, useEffect, useState } from "react";
import { api } from "../../lib/api";
import { failureText } from "./webhooks";

/** A list on its way, refused (the message), or here. */
export type ListLoad<T> = { kind: "loading" } | { kind: "failed"; message: string } | { kind: "ready"; items: T[] };

/**
 * GET ``path`` (relative to /api/v1/, answering a JSON array) on mount and whenever it changes;
 * ``reload()`` asks again and resolves once the answer (or the failure) is shown. A failure
 * after a good load replaces the list with the failure, so a stale list never passes for a fresh one.
 */
export function useListLoad<T>(path: string): { load: ListLoad<T>; reload: () => Promise<void> } {
  const [load, setLoad] = useState<ListLoad<T>>({ kind: "loading" });
  const reload = useCallback(async () => {
    try {
      setLoad({ kind: "ready", items: await api<T[]>(path) });
    } catch (err) {
      setLoad({ kind: "failed", message: failureText(err) });
    }
  }, [path]);
  useEffect(() => { void reload(); }, [reload]);
  return { load, reload };
}
