// React hooks over the shared live stream (liveEvents.ts): a run's event log, and "something changed" for a set of runs.
import type { RunEvent } from "../api/types";
import { useEffect, useRef, useState } from "react";
import { sharedStream, type Connection, type RunEventStream } from "./liveEvents";

/** Calls ``fn`` at most once per ``ms`` (trailing), so a burst of events costs one reload. */
export function useDebounced(fn: () => void, ms: number): () => void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => { if (timer.current) clearTimeout(timer.current); }, []);
  return useRef(() => {
    if (timer.current) return;
    timer.current = setTimeout(() => { timer.current = null; fnRef.current(); }, ms);
  }).current;
}

/** The connection state of the shared stream, for a "Live" / "Reconnecting…" line. */
export function useConnection(stream: RunEventStream = sharedStream()): Connection {
  const [state, setState] = useState<Connection>(stream.connection);
  useEffect(() => stream.onConnectionChange(setState), [stream]);
  return state;
}

/**
 * Every event of ``runId`` in seq order, each once: the backlog, then live. ``onEvents``
 * runs (debounced by ``debounceMs``) after new ones arrived, e.g. to reload the run.
 */
export function useRunEvents(runId: number | null, onEvents?: () => void, debounceMs = 150, stream: RunEventStream = sharedStream()): RunEvent[] {
  const [events, setEvents] = useState<RunEvent[]>([]);
  const changed = useDebounced(() => onEvents?.(), debounceMs);
  useEffect(() => {
    if (runId === null) return;
    setEvents([]);
    return stream.follow(runId, 0, (batch) => {
      setEvents((old) => [...old, ...batch]);
      changed();
    });
  }, [runId, stream, changed]);
  return events;
}

/** Calls ``onChange`` (debounced) when any of ``runs`` commits a new event after its ``event_seq``. */
export function useRunsChanged(runs: { id: number; event_seq?: number }[] | undefined, onChange: () => void, debounceMs = 250, stream: RunEventStream = sharedStream()): void {
  const changed = useDebounced(onChange, debounceMs);
  // "id:seq,id:seq" of the runs that carry an event_seq: a new array of the same runs
  // at the same events is the same key, so the streams are not followed again.
  const key = (runs ?? []).flatMap((r) => (r.event_seq === undefined ? [] : [`${r.id}:${r.event_seq}`])).join(",");
  useEffect(() => {
    const followed = key ? key.split(",").map((pair) => pair.split(":").map(Number) as [number, number]) : [];
    const stops = followed.map(([id, seq]) => stream.follow(id, seq, changed));
    return () => stops.forEach((stop) => stop());
  }, [key, stream, changed]);
}

/** Calls ``onNew`` (debounced) when runs were created, while ``enabled`` (e.g. on a list's first page). */
export function useNewRuns(enabled: boolean, onNew: () => void, debounceMs = 300, stream: RunEventStream = sharedStream()): void {
  const changed = useDebounced(onNew, debounceMs);
  useEffect(() => (enabled ? stream.watchNewRuns(changed) : undefined), [enabled, stream, changed]);
}
