// Each node's last input and output in this browser session, from the last draft run or node test: what the node panel shows beside the form.
import type { RunDetail } from "../../api/types";
import { useSyncExternalStore } from "react";

/** What a node got and gave the last time it ran from the builder. */
export interface NodeData {
  /** "draft": a step of a draft run (Run draft); "test": a node test (Test node). */
  source: "draft" | "test";
  runId: number;
  /** The draft run's step (its input is read from the step's API when shown); null for a test. */
  stepId: number | null;
  status: string;
  /** The state the node was given (undefined: not known yet, read from ``stepId``). */
  input?: unknown;
  output: unknown;
}

const STORAGE_KEY = "ballast:builder:last-data";
const FINISHED = new Set(["succeeded", "failed", "cancelled"]);
const listeners = new Set<() => void>();

function load(): Record<string, NodeData> {
  try {
    const raw = window.sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as Record<string, NodeData>) : {};
  } catch {
    return {};  // no storage (private mode, tests): this page's memory only
  }
}

let entries: Record<string, NodeData> = load();

function keyOf(graphId: number, nodeId: string): string {
  return `${graphId}:${nodeId}`;
}

function commit(next: Record<string, NodeData>): void {
  entries = next;
  try {
    window.sessionStorage.setItem(STORAGE_KEY, JSON.stringify(next));
  } catch {
    // Too large or no storage: the page keeps it in memory.
  }
  listeners.forEach((l) => l());
}

/** Record ``data`` as node ``nodeId``'s last input and output (a node test's result). */
export function recordNodeData(graphId: number, nodeId: string, data: NodeData): void {
  commit({ ...entries, [keyOf(graphId, nodeId)]: data });
}

/**
 * Record each finished top-level step of draft run ``run`` as its node's last data (the
 * drawer calls this on every read of the run). A step already recorded is left as it is,
 * so repeated reads notify no one.
 */
export function recordDraftRun(graphId: number, run: Pick<RunDetail, "id" | "steps">): void {
  let next: Record<string, NodeData> | null = null;
  for (const s of run.steps ?? []) {
    if (s.parent !== null || !FINISHED.has(s.status)) continue;
    const key = keyOf(graphId, s.node_id);
    const had = (next ?? entries)[key];
    if (had && had.source === "draft" && had.stepId === s.id && had.status === s.status) continue;
    next = { ...(next ?? entries), [key]: { source: "draft", runId: run.id, stepId: s.id, status: s.status, output: s.status === "succeeded" ? s.output : s.error } };
  }
  if (next) commit(next);
}

/** Node ``nodeId``'s last data in this session (undefined: it has not run from the builder). */
export function useNodeData(graphId: number | null, nodeId: string): NodeData | undefined {
  return useSyncExternalStore(
    (listener) => { listeners.add(listener); return () => { listeners.delete(listener); }; },
    () => (graphId === null ? undefined : entries[keyOf(graphId, nodeId)]),
  );
}

/** Forget everything (tests). */
export function clearNodeData(): void {
  commit({});
}
