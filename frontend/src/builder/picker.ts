// The node picker's logic (pure): which kinds match a search, keyboard moves, and adding a picked node placed and connected.
import type { NodeKindInfo } from "../api/types";
import { freshId, type EdgeSpec, type GraphSpec, type NodeSpec, type Position } from "./spec";

/** Where the picker connects the node it adds: from an output handle, or into an input handle (an edge dragged backwards). */
export interface PickerOrigin {
  nodeId: string;
  /** The handle's name; null for a node's one unnamed handle. */
  handleId: string | null;
  type: "source" | "target";
}

/** Column step between a node and the one added after it (flow px; the cards are 200 px wide). */
export const COLUMN = 260;
/** Row step for a node that would overlap another (flow px). */
export const ROW = 130;

/** Whether a node of ``kind`` takes an input edge. */
export function hasInput(kind: NodeKindInfo): boolean {
  return kind.inputs.length > 0;
}

/** The output a picked node continues from: its unnamed output, else its first named one; undefined when it has none. */
export function continueHandle(kind: NodeKindInfo): string | null | undefined {
  if (kind.default_output) return null;
  return kind.outputs[0];
}

/**
 * The kinds the picker lists for ``query`` (case-insensitive; every word must match the kind,
 * title, description or category), best first: a title or kind starting with the query, then
 * one containing it, then a match in the description or category; catalogue order within each.
 * With an ``origin``, only kinds that can be connected there: an output needs a kind with an
 * input (no Start), an input one with an output (no End).
 */
export function pickerKinds(catalogue: readonly NodeKindInfo[], query: string, origin: PickerOrigin | null = null): NodeKindInfo[] {
  const q = query.trim().toLowerCase();
  const words = q.split(/\s+/).filter(Boolean);
  const fits = (k: NodeKindInfo) => !origin || (origin.type === "source" ? hasInput(k) : continueHandle(k) !== undefined);
  const rank = (k: NodeKindInfo): number => {
    const title = k.title.toLowerCase();
    const kind = k.kind.toLowerCase();
    if (!q) return 0;
    if (title.startsWith(q) || kind.startsWith(q)) return 0;
    if (title.includes(q) || kind.includes(q)) return 1;
    return 2;
  };
  return catalogue
    .filter((k) => fits(k) && words.every((w) => `${k.kind} ${k.title} ${k.description} ${k.category}`.toLowerCase().includes(w)))
    .map((k, i) => ({ k, r: rank(k), i }))
    .sort((a, b) => a.r - b.r || a.i - b.i)
    .map(({ k }) => k);
}

/**
 * The picker's highlighted row after ``key`` (ArrowDown/ArrowUp wrap round, Home, End,
 * PageDown/PageUp by 5) among ``count`` rows; ``active`` unchanged for any other key, 0 when
 * ``count`` is 0.
 */
export function movePick(active: number, count: number, key: string): number {
  if (count <= 0) return 0;
  const at = Math.min(Math.max(active, 0), count - 1);
  switch (key) {
    case "ArrowDown": return (at + 1) % count;
    case "ArrowUp": return (at - 1 + count) % count;
    case "Home": return 0;
    case "End": return count - 1;
    case "PageDown": return Math.min(at + 5, count - 1);
    case "PageUp": return Math.max(at - 5, 0);
    default: return at;
  }
}

function overlaps(a: Position, b: Position): boolean {
  return Math.abs(a.x - b.x) < COLUMN - 40 && Math.abs(a.y - b.y) < ROW - 20;
}

/** ``at`` moved down by rows until no node of ``nodes`` (other than ``ignore``) overlaps it. */
export function freeSpot(nodes: readonly NodeSpec[], at: Position, ignore: ReadonlySet<string> = new Set()): Position {
  const taken = nodes.filter((n) => n.position && !ignore.has(n.id)).map((n) => n.position as Position);
  let spot = { x: Math.round(at.x), y: Math.round(at.y) };
  for (let i = 0; i < 50 && taken.some((p) => overlaps(p, spot)); i++) spot = { x: spot.x, y: spot.y + ROW };
  return spot;
}

/**
 * Where a node added from ``origin`` by its "+" goes: one column to the right of an output
 * (left of an input), the ``index``-th of ``count`` handles spread over rows, then moved down
 * clear of other nodes.
 */
export function placeFrom(spec: GraphSpec, origin: PickerOrigin, index = 0, count = 1): Position {
  const from = spec.nodes.find((n) => n.id === origin.nodeId)?.position ?? { x: 0, y: 0 };
  const dy = (index - (count - 1) / 2) * ROW;
  return freeSpot(spec.nodes, { x: from.x + (origin.type === "source" ? COLUMN : -COLUMN), y: from.y + dy });
}

/** The ids reachable from ``start`` along ``edges`` (``start`` included), never passing ``stop``. */
function downstream(edges: readonly EdgeSpec[], start: string, stop: string): Set<string> {
  const seen = new Set([start]);
  const todo = [start];
  while (todo.length) {
    const id = todo.pop() as string;
    for (const e of edges) {
      if (e.source !== id || e.target === stop || seen.has(e.target)) continue;
      seen.add(e.target);
      todo.push(e.target);
    }
  }
  return seen;
}

export interface Added {
  spec: GraphSpec;
  /** The new node's id. */
  id: string;
  /** Whether the node went into an existing edge (``from`` -> new -> its old target). */
  inserted: boolean;
}

/**
 * ``spec`` with a node of ``kind`` at ``at`` (flow px), connected to ``origin`` when given:
 * an output gets an edge into the new node; an input gets one from the new node's
 * continuing output. With ``insert`` and an output already connected to exactly one node by
 * that handle, the new node goes into that edge (output -> new -> old target, as n8n's and
 * Dify's "+" on a connected handle does) when it has an output to continue from; the old
 * target and everything after it then move right to make room when it is less than two
 * columns away. A spec without the origin node gets the node unconnected.
 */
export function addConnected(spec: GraphSpec, kind: NodeKindInfo, at: Position, origin: PickerOrigin | null, insert = false): Added {
  const id = freshId(kind.kind, new Set(spec.nodes.map((n) => n.id)));
  const node: NodeSpec = { id, kind: kind.kind, config: {}, position: { x: Math.round(at.x), y: Math.round(at.y) } };
  const source = origin && spec.nodes.find((n) => n.id === origin.nodeId);
  if (!origin || !source) return { spec: { ...spec, nodes: [...spec.nodes, node] }, id, inserted: false };
  const handle = (h: string | null | undefined) => (h ? h : null);
  if (origin.type === "target") {
    const out = continueHandle(kind);
    const edge: EdgeSpec = { source: id, target: origin.nodeId };
    if (out) edge.source_handle = out;
    if (origin.handleId) edge.target_handle = origin.handleId;
    return { spec: { ...spec, nodes: [...spec.nodes, node], edges: [...spec.edges, edge] }, id, inserted: false };
  }
  const into: EdgeSpec = { source: origin.nodeId, target: id };
  if (origin.handleId) into.source_handle = origin.handleId;
  const existing = spec.edges.filter((e) => e.source === origin.nodeId && handle(e.source_handle) === origin.handleId);
  const out = continueHandle(kind);
  const old = existing[0];
  if (!insert || existing.length !== 1 || !old || out === undefined || !hasInput(kind)) {
    return { spec: { ...spec, nodes: [...spec.nodes, node], edges: [...spec.edges, into] }, id, inserted: false };
  }
  const onward: EdgeSpec = { source: id, target: old.target };
  if (out) onward.source_handle = out;
  if (old.target_handle) onward.target_handle = old.target_handle;
  const target = spec.nodes.find((n) => n.id === old.target);
  const from = source.position ?? { x: 0, y: 0 };
  const placed = { x: from.x + COLUMN, y: from.y };
  node.position = placed;
  let nodes = spec.nodes;
  const gap = target?.position ? target.position.x - from.x : Infinity;
  if (gap < 2 * COLUMN) {
    const moving = downstream(spec.edges, old.target, origin.nodeId);
    const shift = 2 * COLUMN - gap;
    nodes = nodes.map((n) => (moving.has(n.id) && n.position ? { ...n, position: { x: n.position.x + shift, y: n.position.y } } : n));
  }
  node.position = freeSpot(nodes, placed);
  const edges = [...spec.edges.filter((e) => e !== old), into, onward];
  return { spec: { ...spec, nodes: [...nodes, node], edges }, id, inserted: true };
}

/** A screen rectangle (px). */
export interface Box { x: number; y: number; width: number; height: number }

function hits(a: Box, b: Box): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

/**
 * ``box`` moved the least distance so it overlaps none of ``overlays`` and stays inside
 * ``area`` when it can (the canvas: a dropped node never lands under its toolbar, minimap,
 * controls or problems list). Tries each overlay's four sides and keeps the nearest clear
 * spot; ``box`` itself when it is already clear, or when no clear spot is found.
 */
export function clearOf(box: Box, overlays: readonly Box[], area: Box): Box {
  const clear = (b: Box) => overlays.every((o) => !hits(b, o))
    && b.x >= area.x && b.y >= area.y && b.x + b.width <= area.x + area.width && b.y + b.height <= area.y + area.height;
  if (overlays.every((o) => !hits(box, o))) return box;
  const candidates: Box[] = [];
  for (const o of overlays) {
    candidates.push(
      { ...box, y: o.y + o.height + 8 }, { ...box, y: o.y - box.height - 8 },
      { ...box, x: o.x + o.width + 8 }, { ...box, x: o.x - box.width - 8 },
    );
  }
  // Two overlays in a corner (the controls beside the canvas's edge): combine the moves.
  for (const a of [...candidates]) for (const o of overlays) {
    if (!hits(a, o)) continue;
    candidates.push({ ...a, y: o.y + o.height + 8 }, { ...a, y: o.y - a.height - 8 }, { ...a, x: o.x + o.width + 8 }, { ...a, x: o.x - a.width - 8 });
  }
  const dist = (b: Box) => Math.hypot(b.x - box.x, b.y - box.y);
  const best = candidates.filter(clear).sort((a, b) => dist(a) - dist(b))[0];
  return best ?? box;
}
