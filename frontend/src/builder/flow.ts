// The mapping between the graph spec and React Flow's nodes and edges (pure: no React, no DOM).
// The spec is the document; React Flow objects are derived from it and never written back whole,
// so fields the canvas does not know (or defaults left out) survive every edit.
import type { NodeKindInfo, ValidationIssue, ValidationResult } from "../api/types";
import type { Connection, Edge, Node } from "@xyflow/react";
import type { EdgeSpec, GraphSpec, NodeSpec, NoteSpec, Position } from "./spec";
import { edgeKey, type CostFigure } from "./store";

/** React Flow ids of notes carry this prefix so they never clash with node ids. */
export const NOTE_PREFIX = "note:";

/** The handles a node draws, in a stable order (declared order first, then names only edges use). */
export interface NodeHandles {
  /** Named input handles; [] or one name = a single unnamed input (edges leave target_handle out). */
  inputs: string[];
  hasInput: boolean;
  /** Named output handles, in the kind's order (condition: true/false or cases then default). */
  outputs: string[];
  /** The one unnamed output of a plain node (false for an end node, and for routing nodes). */
  defaultOutput: boolean;
  optional: string[];
}

/** One node's data on the canvas. */
export interface BallastNodeData extends Record<string, unknown> {
  node: NodeSpec;
  info: NodeKindInfo | undefined;
  handles: NodeHandles;
  errors: ValidationIssue[];
  readOnly: boolean;
  /** How this node differs between two compared versions (absent: unchanged, or no comparison drawn). */
  diff?: "added" | "removed" | "changed";
  /** The pre-run estimate of one execution, when it costs anything (absent for free nodes). */
  estimate?: CostFigure;
  /** On a run's page: the node's state in that run (absent in the builder). */
  run?: NodeRunMark;
  /**
   * The output handles that have an edge, each as ``[name]`` (``[]`` for the unnamed output),
   * sorted: a string, so an unchanged set compares equal and the card is not drawn again.
   */
  linked?: string;
}

/** A node's state in a run, drawn on its card (runs/nodeStates.ts works it out from the run's steps). */
export interface NodeRunMark {
  /**
   * ``interrupted``: a running step whose worker stopped heartbeating (until recovery takes it back);
   * ``kept``: a fork's node that has no step of its own, its result kept from the run it was forked from.
   */
  state: "pending" | "running" | "succeeded" | "failed" | "waiting" | "skipped" | "parked" | "retrying" | "interrupted" | "cancelled" | "kept";
  /** A short line under the label: "attempt 2 of 3", "1.2 s", "3 iterations"; absent for none. */
  detail?: string;
}

export interface NoteNodeData extends Record<string, unknown> {
  note: NoteSpec;
  readOnly: boolean;
}

export type BallastFlowNode = Node<BallastNodeData, "ballast">;
export type NoteFlowNode = Node<NoteNodeData, "note">;
export type FlowNode = BallastFlowNode | NoteFlowNode;

interface ValidationHandles {
  inputs?: string[];
  outputs?: string[];
  default_output?: boolean;
  optional?: string[];
}

/**
 * The handles of ``node``: validation's per-node ``handles`` when present (they follow the
 * config, e.g. a condition's cases), else the catalogue's fixed ones. Handle names that
 * edges use but the kind does not declare are appended (sorted) so those edges stay
 * visible while validation reports them. ``edges``: the graph's edges, or only ``node``'s outgoing ones.
 */
export function nodeHandles(node: NodeSpec, info: NodeKindInfo | undefined, fromValidation: ValidationHandles | undefined,
  edges: readonly EdgeSpec[]): NodeHandles {
  const extra = info as (NodeKindInfo & { default_output?: boolean; optional?: string[] }) | undefined;
  const inputs = fromValidation?.inputs ?? info?.inputs ?? ["in"];
  const declared = fromValidation?.outputs ?? info?.outputs ?? [];
  const defaultOutput = fromValidation?.default_output ?? extra?.default_output ?? declared.length === 0;
  const outputs = [...declared];
  const used = new Set<string>();
  for (const e of edges) if (e.source === node.id && e.source_handle) used.add(e.source_handle);
  for (const name of [...used].sort()) if (!outputs.includes(name)) outputs.push(name);
  return {
    inputs: inputs.length > 1 ? inputs : [],
    hasInput: inputs.length > 0,
    outputs,
    defaultOutput,
    optional: fromValidation?.optional ?? extra?.optional ?? [],
  };
}

/** Where a node without a stored position is drawn: a grid in spec order (not written to the spec). */
export function fallbackPosition(index: number): Position {
  return { x: (index % 6) * 260, y: Math.floor(index / 6) * 160 };
}

export interface FlowOptions {
  catalogue: readonly NodeKindInfo[];
  validation: ValidationResult | null;
  readOnly: boolean;
  selectedNodes?: ReadonlySet<string>;
  selectedNotes?: ReadonlySet<string>;
  selectedEdges?: ReadonlySet<string>;
  /** A version comparison drawn on the canvas: node id -> how it changed (versions/diff.ts diffNodeStatus). */
  diffStatus?: Readonly<Record<string, "added" | "removed" | "changed">>;
  /** A run drawn on the canvas: node id -> its state in that run. */
  runMarks?: Readonly<Record<string, NodeRunMark>>;
}

/** The React Flow id of the ``index``-th spec edge (edgeKey, suffixed for exact duplicates). */
export function flowEdgeIds(edges: readonly EdgeSpec[]): string[] {
  const seen = new Map<string, number>();
  return edges.map((e) => {
    const key = edgeKey(e);
    const n = seen.get(key) ?? 0;
    seen.set(key, n + 1);
    return n === 0 ? key : `${key}#${n}`;
  });
}

/** Validation errors grouped by node id (errors without a node are left out). */
export function errorsByNode(validation: ValidationResult | null): Map<string, ValidationIssue[]> {
  const out = new Map<string, ValidationIssue[]>();
  for (const issue of validation?.errors ?? []) {
    if (!issue.node) continue;
    const list = out.get(issue.node) ?? [];
    list.push(issue);
    out.set(issue.node, list);
  }
  return out;
}

/** Whether an estimate is worth showing (on a node card, in its panel): transforms, conditions cost nothing. */
export function costsSomething(figure: CostFigure | undefined): figure is CostFigure {
  return !!figure && ((figure.tokens ?? 0) > 0 || Number(figure.usd ?? 0) > 0);
}

/** The accessible name of a node on a run's canvas: "node review: waiting", "node fetch: interrupted". */
export function runAriaLabel(nodeId: string, mark: NodeRunMark): string {
  return `node ${nodeId}: ${mark.state}`;
}

/** React Flow nodes (graph nodes, then notes) for ``spec``. */
export function specToFlowNodes(spec: GraphSpec, opts: FlowOptions): FlowNode[] {
  const kinds = new Map(opts.catalogue.map((k) => [k.kind, k]));
  const errors = errorsByNode(opts.validation);
  // Each node's outgoing edges, found in one pass (scanning every edge for every node was
  // quadratic: 90 000 steps for 300 nodes, each time validation answered).
  const outgoing = new Map<string, EdgeSpec[]>();
  for (const e of spec.edges) {
    const list = outgoing.get(e.source);
    if (list) list.push(e); else outgoing.set(e.source, [e]);
  }
  const nodes: FlowNode[] = spec.nodes.map((node, i) => ({
    id: node.id,
    type: "ballast",
    position: node.position ? { x: node.position.x, y: node.position.y } : fallbackPosition(i),
    selected: opts.selectedNodes?.has(node.id) ?? false,
    deletable: !opts.readOnly,
    draggable: !opts.readOnly,
    connectable: !opts.readOnly,
    // A run's page names each node's state on React Flow's focusable node wrapper ("node review: waiting").
    ...(opts.runMarks?.[node.id] ? { ariaLabel: runAriaLabel(node.id, opts.runMarks[node.id] as NodeRunMark) } : {}),
    data: {
      node,
      info: kinds.get(node.kind),
      handles: nodeHandles(node, kinds.get(node.kind), opts.validation?.handles[node.id] as ValidationHandles | undefined,
        outgoing.get(node.id) ?? []),
      errors: errors.get(node.id) ?? [],
      readOnly: opts.readOnly,
      linked: [...new Set((outgoing.get(node.id) ?? []).map((e) => `[${e.source_handle ?? ""}]`))].sort().join(""),
      ...(opts.diffStatus?.[node.id] ? { diff: opts.diffStatus[node.id] } : {}),
      ...(costsSomething(opts.validation?.estimate?.nodes[node.id]) ? { estimate: opts.validation?.estimate?.nodes[node.id] } : {}),
      ...(opts.runMarks?.[node.id] ? { run: opts.runMarks[node.id] } : {}),
    },
  }));
  for (const note of spec.notes ?? []) {
    nodes.push({
      id: NOTE_PREFIX + note.id,
      type: "note",
      position: { x: note.position.x, y: note.position.y },
      width: note.width ?? 220,
      height: note.height ?? 140,
      selected: opts.selectedNotes?.has(note.id) ?? false,
      deletable: !opts.readOnly,
      draggable: !opts.readOnly,
      zIndex: -1,
      data: { note, readOnly: opts.readOnly },
    });
  }
  return nodes;
}

/**
 * ``nodes`` with ``selected`` set from the selection: objects whose flag already matches are
 * returned as they are (their ``data`` is never copied), so a selection change costs one pass
 * and no node is drawn again unless its own flag flipped. Same array when nothing changed.
 */
export function withSelection(nodes: readonly FlowNode[], selectedNodes: ReadonlySet<string>,
  selectedNotes: ReadonlySet<string>): FlowNode[] {
  let changed = false;
  const out = nodes.map((n) => {
    const selected = n.type === "note" ? selectedNotes.has(n.id.slice(NOTE_PREFIX.length)) : selectedNodes.has(n.id);
    if (!!n.selected === selected) return n;
    changed = true;
    return { ...n, selected } as FlowNode;
  });
  return changed ? out : (nodes as FlowNode[]);
}

/**
 * ``nodes`` with the nodes a drag is moving put where React Flow holds them (``live``: React
 * Flow id -> flow position, unrounded) and flagged ``dragging``. Only those objects are
 * copied; same array when ``live`` is empty or every position already matches. Used when the
 * canvas hands React Flow a new node array in the middle of a drag (the selection flips as a
 * drag starts): without it the dragged nodes would jump back to their positions before the drag.
 */
export function withLivePositions(nodes: FlowNode[], live: ReadonlyMap<string, Position>): FlowNode[] {
  if (live.size === 0) return nodes;
  let changed = false;
  const out = nodes.map((n) => {
    const p = live.get(n.id);
    if (!p || (n.position.x === p.x && n.position.y === p.y && n.dragging)) return n;
    changed = true;
    return { ...n, position: { x: p.x, y: p.y }, dragging: true } as FlowNode;
  });
  return changed ? out : nodes;
}

/** React Flow edges for ``spec`` (target handles of single-input nodes stay unnamed). */
export function specToFlowEdges(spec: GraphSpec, opts: Pick<FlowOptions, "selectedEdges" | "readOnly">): Edge[] {
  const ids = flowEdgeIds(spec.edges);
  return spec.edges.map((e, i) => ({
    id: ids[i] as string,
    source: e.source,
    target: e.target,
    sourceHandle: e.source_handle ?? null,
    targetHandle: e.target_handle ?? null,
    selected: opts.selectedEdges?.has(ids[i] as string) ?? false,
    deletable: !opts.readOnly,
    data: { index: i },
  }));
}

/** The spec edge a new React Flow connection makes (handles left out when unnamed). */
export function connectionToEdge(c: Connection): EdgeSpec {
  const edge: EdgeSpec = { source: c.source, target: c.target };
  if (c.sourceHandle) edge.source_handle = c.sourceHandle;
  if (c.targetHandle) edge.target_handle = c.targetHandle;
  return edge;
}

/** True when ``spec`` already has an edge equal to ``edge`` (same ends and handles). */
export function hasEdge(spec: GraphSpec, edge: EdgeSpec): boolean {
  const key = edgeKey(edge);
  return spec.edges.some((e) => edgeKey(e) === key);
}

/**
 * The spec with React Flow positions written back: only nodes and notes whose position
 * changed get a new ``position`` (rounded to whole pixels); every other object is the same
 * object, so an unchanged layout returns the same spec.
 */
export function applyPositions(spec: GraphSpec, positions: ReadonlyMap<string, Position>): GraphSpec {
  let nodesChanged = false;
  let notesChanged = false;
  const round = (p: Position): Position => ({ x: Math.round(p.x), y: Math.round(p.y) });
  const nodes = spec.nodes.map((n) => {
    const p = positions.get(n.id);
    if (!p) return n;
    const r = round(p);
    if (n.position && n.position.x === r.x && n.position.y === r.y) return n;
    nodesChanged = true;
    return { ...n, position: r };
  });
  let notes = spec.notes;
  if (spec.notes) {
    notes = spec.notes.map((note) => {
      const p = positions.get(NOTE_PREFIX + note.id);
      if (!p) return note;
      const r = round(p);
      if (note.position.x === r.x && note.position.y === r.y) return note;
      notesChanged = true;
      return { ...note, position: r };
    });
  }
  if (!nodesChanged && !notesChanged) return spec;
  const out = { ...spec, nodes: nodesChanged ? nodes : spec.nodes };
  if (notesChanged && notes) out.notes = notes;
  return out;
}

/** The spec read back from React Flow nodes: positions applied, everything else as it was. */
export function flowToSpec(spec: GraphSpec, nodes: readonly Pick<Node, "id" | "position">[]): GraphSpec {
  return applyPositions(spec, new Map(nodes.map((n) => [n.id, n.position])));
}

/** The spec without the given nodes (and their edges), edges (React Flow ids) and notes. */
export function removeElements(spec: GraphSpec, nodeIds: ReadonlySet<string>, edgeIds: ReadonlySet<string>,
  noteIds: ReadonlySet<string>): GraphSpec {
  if (nodeIds.size === 0 && edgeIds.size === 0 && noteIds.size === 0) return spec;
  const ids = flowEdgeIds(spec.edges);
  const edges = spec.edges.filter((e, i) => !edgeIds.has(ids[i] as string) && !nodeIds.has(e.source) && !nodeIds.has(e.target));
  const out: GraphSpec = { ...spec, nodes: spec.nodes.filter((n) => !nodeIds.has(n.id)), edges };
  if (spec.notes) out.notes = spec.notes.filter((n) => !noteIds.has(n.id));
  return out;
}
