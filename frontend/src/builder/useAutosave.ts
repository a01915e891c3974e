// Draft autosave: a debounced PATCH with base_revision; a 409 stops saving and keeps both copies.
import { useCallback, useEffect, useRef, useState } from "react";
import type { GraphDetail, StoredDraft } from "../api/types";
import { ApiError, api } from "../lib/api";
import { hasPendingEdits, usePendingEdits } from "./pendingEdits";
import type { GraphSpec } from "./spec";

export const AUTOSAVE_DEBOUNCE_MS = 800;

export type SaveStatus = "saved" | "unsaved" | "saving" | "conflict" | "error";


export interface Autosave {
  status: SaveStatus;
  revision: number;
  /** The other edit that refused our save (status "conflict"). */
  conflict: StoredDraft | null;
  error: string | null;
  lastSavedAt: Date | null;
  /** Save now (no debounce); resolves true when the draft on the server equals ``spec``. */
  flush(): Promise<boolean>;
  /** Take the stored draft as the new base (after a conflict: the caller resets the document to it). */
  adopt(stored: StoredDraft): void;
  /** Stop saving and guarding (the page is about to leave for a copy of the graph). */
  detach(): void;
}

/**
 * Autosave ``spec`` for graph ``graphId`` starting from ``initial`` (what was loaded).
 * Never overwrites: every PATCH names the revision it was based on, and after a 409 no
 * further save is sent until ``adopt`` is called. Disabled (``enabled`` false) for read-only views.
 */
export function useAutosave(graphId: number, spec: GraphSpec, initial: Pick<StoredDraft, "spec" | "revision">, enabled: boolean): Autosave {
  const [status, setStatus] = useState<SaveStatus>("saved");
  const [conflict, setConflict] = useState<StoredDraft | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [lastSavedAt, setLastSavedAt] = useState<Date | null>(null);
  const saved = useRef<GraphSpec>(initial.spec);
  const revision = useRef(initial.revision);
  const [revisionState, setRevisionState] = useState(initial.revision);
  const latest = useRef(spec);
  latest.current = spec;
  const inFlight = useRef<Promise<boolean> | null>(null);
  const blocked = useRef(false);

  const save = useCallback(async (): Promise<boolean> => {
    if (blocked.current) return false;
    if (inFlight.current) { await inFlight.current; }
    const sending = latest.current;
    if (sending === saved.current) { setStatus("saved"); return true; }
    setStatus("saving");
    const p = (async () => {
      try {
        const r = await api<GraphDetail>(`graphs/${graphId}/`, {
          method: "PATCH", body: { spec: sending, base_revision: revision.current },
        });
        saved.current = sending;
        revision.current = r.revision;
        setRevisionState(r.revision);
        setLastSavedAt(new Date());
        setError(null);
        setStatus(latest.current === sending ? "saved" : "unsaved");
        return latest.current === sending;
      } catch (err) {
        if (err instanceof ApiError && err.status === 409 && err.body && typeof err.body.current === "object" && err.body.current) {
          blocked.current = true;
          setConflict(err.body.current as StoredDraft);
          setStatus("conflict");
        } else {
          setError(err instanceof Error ? err.message : String(err));
          setStatus("error");
        }
        return false;
      } finally {
        inFlight.current = null;
      }
    })();
    inFlight.current = p;
    return p;
  }, [graphId]);

  useEffect(() => {
    if (!enabled || blocked.current) return;
    if (spec === saved.current) return;
    setStatus((s) => (s === "saving" ? s : "unsaved"));
    const t = window.setTimeout(() => void save(), AUTOSAVE_DEBOUNCE_MS);
    return () => window.clearTimeout(t);
  }, [spec, enabled, save]);

  // A failed save (network, 5xx) is retried after a pause, not in a tight loop.
  useEffect(() => {
    if (status !== "error" || !enabled) return;
    const t = window.setTimeout(() => void save(), 5000);
    return () => window.clearTimeout(t);
  }, [status, enabled, save]);

  useEffect(() => {
    if (!enabled) return;
    const guard = (e: BeforeUnloadEvent) => {
      if (latest.current === saved.current && !inFlight.current && !hasPendingEdits()) return;
      e.preventDefault();
      e.returnValue = "";
    };
    window.addEventListener("beforeunload", guard);
    return () => window.removeEventListener("beforeunload", guard);
  }, [enabled]);

  const adopt = useCallback((stored: StoredDraft) => {
    saved.current = stored.spec;
    revision.current = stored.revision;
    setRevisionState(stored.revision);
    blocked.current = false;
    setConflict(null);
    setStatus("saved");
  }, []);

  const detach = useCallback(() => {
    blocked.current = true;
    saved.current = latest.current;
  }, []);

  // A focused field's typed text (committed on blur) is an unsaved change too.
  const fieldPending = usePendingEdits();
  const shownStatus: SaveStatus = enabled && fieldPending && status === "saved" ? "unsaved" : status;

  return { status: shownStatus, revision: revisionState, conflict, error, lastSavedAt, flush: save, adopt, detach };
}
