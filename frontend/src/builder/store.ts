// The builder's shared state: the graph document with undo/redo, the selection, the catalogue, validation.
// The canvas and the side panels read and change the graph only through BuilderApi (useBuilder()).
import type { NodeKindInfo, ValidationResult } from "../api/types";
import { createContext, useCallback, useContext, useMemo, useReducer } from "react";
import { historyOf, historyPush, historyRedo, historyReset, historyUndo, type History } from "./history";
import type { GraphSpec } from "./spec";

export interface CostFigure { usd: string | number | null; tokens: number | null }

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
