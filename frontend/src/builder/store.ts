// The builder's shared state: the graph document with undo/redo, the selection, the catalogue, validation.
// The canvas and the side panels read and change the graph only through BuilderApi (useBuilder()).
import { createContext, useCallback, useContext, useMemo, useReducer } from "react";
import { historyOf, historyPush, historyRedo, historyReset, historyUndo, type History } from "./history";
import type { GraphSpec } from "./spec";

/** One node kind as GET /api/v1/node-kinds/ describes it. */
export interface NodeKindInfo {
  kind: string;
  title: string;
  description: string;
  category: string;
  config_schema: Record<string, unknown>;
  inputs: string[];
  outputs: string[]; // fixed output handles; [] = one default output
  dynamic_outputs: boolean; // outputs depend on config (validation's `handles` gives them per node)
  repeat_safe: boolean;
  uses_repeat_safe?: boolean; // false: the node's own repeat_safe is refused by validation (start, end, agent ...)
  does_work?: boolean; // false: the step only routes (start, end, join): no timeout, retry or test run
  can_loop?: boolean; // false: never on a loop (start, end): no max_iterations
}

/** One structured validation error. ``path`` is graph-wide (``nodes[2].config.expression``), ``field`` node-relative (``config.expression``). */
export interface ValidationIssue {
  code: string;
  node: string | null;
  field: string | null;
  path?: string | null;
  message: string;
}

export interface CostFigure { usd: string | number | null; tokens: number | null }

/** POST /api/v1/graphs/validate/ answer. */
export interface ValidationResult {
  valid: boolean;
  errors: ValidationIssue[];
  /** Problems that do not block a run (an undeclared input key, an unused reducer). */
  warnings?: ValidationIssue[];
  handles: Record<string, { inputs: string[]; outputs: string[] }>;
  estimate?: { nodes: Record<string, CostFigure>; costliest_path: CostFigure & { nodes: string[] } };
  /** What publishing this spec would store (null when invalid): equal to a version's, the draft is that version. */
  content_hash?: string | null;
}

export interface Selection {
  nodes: string[];
  edges: string[]; // edge keys (edgeKey())
  notes: string[];
  /** A node-relative field path to focus in the side panel (``config.expression``), set by the error list. */
  field: string | null;
}

export const EMPTY_SELECTION: Selection = { nodes: [], edges: [], notes: [], field: null };

/** Everything a builder component may read or do. */
export interface BuilderApi {
  spec: GraphSpec;
  readOnly: boolean;
  catalogue: NodeKindInfo[];
  validation: ValidationResult | null;
  selection: Selection;
  canUndo: boolean;
  canRedo: boolean;
  /** Apply a pure edit as one undo step; consecutive edits with the same ``coalesceKey`` are one step. */
  change(edit: (spec: GraphSpec) => GraphSpec, coalesceKey?: string): void;
  /** Replace the document without an undo step (after loading, or with the server's copy). */
  reset(spec: GraphSpec): void;
  undo(): void;
  redo(): void;
  select(selection: Partial<Selection>): void;
}

/** A stable key for an edge (specs may leave edge ids out). */
export function edgeKey(e: { source: string; target: string; source_handle?: string | null; target_handle?: string | null }): string {
  return `${e.source}:${e.source_handle ?? ""}->${e.target}:${e.target_handle ?? ""}`;
}

interface State {
  history: History<GraphSpec>;
  selection: Selection;
}

type Action =
  | { type: "change"; edit: (spec: GraphSpec) => GraphSpec; key: string | null }
  | { type: "reset"; spec: GraphSpec }
  | { type: "undo" }
  | { type: "redo" }
  | { type: "select"; selection: Partial<Selection> };

function reducer(state: State, action: Action): State {
  switch (action.type) {
    case "change":
      return { ...state, history: historyPush(state.history, action.edit(state.history.present), action.key) };
    case "reset":
      return { ...state, history: historyReset(state.history, action.spec) };
    case "undo":
      return { ...state, history: historyUndo(state.history) };
    case "redo":
      return { ...state, history: historyRedo(state.history) };
    case "select":
      return { ...state, selection: { ...state.selection, ...action.selection } };
  }
}

/** The builder's state for one page; wrap the page in ``<BuilderContext.Provider value={api}>``. */
export function useBuilderState(
  initial: GraphSpec,
  options: { readOnly: boolean; catalogue: NodeKindInfo[]; validation: ValidationResult | null },
): BuilderApi {
  const [state, dispatch] = useReducer(reducer, initial, (spec) => ({ history: historyOf(spec), selection: EMPTY_SELECTION }));
  const change = useCallback((edit: (spec: GraphSpec) => GraphSpec, key?: string) => dispatch({ type: "change", edit, key: key ?? null }), []);
  const reset = useCallback((spec: GraphSpec) => dispatch({ type: "reset", spec }), []);
  const undo = useCallback(() => dispatch({ type: "undo" }), []);
  const redo = useCallback(() => dispatch({ type: "redo" }), []);
  const select = useCallback((selection: Partial<Selection>) => dispatch({ type: "select", selection }), []);
  return useMemo(
    () => ({
      spec: state.history.present,
      readOnly: options.readOnly,
      catalogue: options.catalogue,
      validation: options.validation,
      selection: state.selection,
      canUndo: state.history.past.length > 0,
      canRedo: state.history.future.length > 0,
      change,
      reset,
      undo,
      redo,
      select,
    }),
    [state, options.readOnly, options.catalogue, options.validation, change, reset, undo, redo, select],
  );
}

export const BuilderContext = createContext<BuilderApi | null>(null);

/** The builder state of the enclosing BuilderContext provider. */
export function useBuilder(): BuilderApi {
  const api = useContext(BuilderContext);
  if (api === null) throw new Error("useBuilder outside BuilderContext.Provider");
  return api;
}
