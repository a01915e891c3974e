// The graph spec as the API, CLI and builder share it (mirrors graphs/spec.py), and pure edits of it.

export interface Position { x: number; y: number }

export interface RetryPolicy {
  max_attempts?: number;
  backoff_seconds?: number;
  backoff_multiplier?: number;
  max_backoff_seconds?: number;
  retry_on?: string[];
}

export interface NodeSpec {
  id: string;
  kind: string;
  label?: string | null;
  config: Record<string, unknown>;
  position?: Position | null;
  retry?: RetryPolicy;
  timeout_seconds?: number | null;
  max_iterations?: number | null;
  repeat_safe?: boolean | null;
}

export interface EdgeSpec {
  id?: string | null;
  source: string;
  target: string;
  source_handle?: string | null;
  target_handle?: string | null;
}

/** A sticky note: layout only, like node positions (validation and runs ignore it). */
export interface NoteSpec {
  id: string;
  text: string;
  position: Position;
  width?: number;
  height?: number;
  color?: string;
}

export type Reducer = "replace" | "append" | "extend" | "add" | "merge" | "max" | "min";

export interface StateKeySpec { reducer?: Reducer; default?: unknown; description?: string }

export interface GraphSettings {
  max_parallelism?: number;
  max_steps?: number;
  budget_usd?: string | number | null;
  budget_tokens?: number | null;
}

export interface GraphSpec {
  version?: 1;
  name: string;
  description?: string;
  input_schema?: Record<string, unknown>;
  state?: Record<string, StateKeySpec>;
  settings?: GraphSettings;
  nodes: NodeSpec[];
  edges: EdgeSpec[];
  notes?: NoteSpec[];
  /** The draft's pinned test input (a webhook listen's capture): the Run dialog starts with it. No version holds it. */
  test_input?: Record<string, unknown> | null;
}

/** An id not in ``taken``: ``base`` itself, else ``base_2``, ``base_3``, ... (valid as a node id). */
export function freshId(base: string, taken: ReadonlySet<string>): string {
  const clean = base.replace(/[^A-Za-z0-9_-]/g, "_").replace(/^([^A-Za-z_])/, "_$1").slice(0, 56) || "node";
  if (!taken.has(clean)) return clean;
  for (let i = 2; ; i++) {
    const candidate = `${clean}_${i}`;
    if (!taken.has(candidate)) return candidate;
  }
}

/** The spec without the given nodes and every edge touching them. */
export function removeNodes(spec: GraphSpec, ids: ReadonlySet<string>): GraphSpec {
  return {
    ...spec,
    nodes: spec.nodes.filter((n) => !ids.has(n.id)),
    edges: spec.edges.filter((e) => !ids.has(e.source) && !ids.has(e.target)),
  };
}

/** The spec with one node's fields replaced (``patch`` is shallow-merged; unknown id = unchanged spec). */
export function updateNode(spec: GraphSpec, id: string, patch: Partial<NodeSpec>): GraphSpec {
  return { ...spec, nodes: spec.nodes.map((n) => (n.id === id ? { ...n, ...patch } : n)) };
}
