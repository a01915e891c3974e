// Copy and paste of a part of a graph: a fragment of nodes, the edges inside it, and notes (pure).
import { freshId, type EdgeSpec, type GraphSpec, type NodeSpec, type NoteSpec, type Position } from "./spec";

/** What goes on the clipboard (JSON text, also kept in localStorage for other tabs). */
export interface Fragment {
  ballast_fragment: 1;
  nodes: NodeSpec[];
  edges: EdgeSpec[];
  notes: NoteSpec[];
}

export const CLIPBOARD_STORAGE_KEY = "ballast.builder.clipboard";

/** The fragment of ``spec`` with the given nodes and notes and every edge whose two ends are among the nodes. */
export function copyFragment(spec: GraphSpec, nodeIds: ReadonlySet<string>, noteIds: ReadonlySet<string> = new Set()): Fragment {
  return {
    ballast_fragment: 1,
    nodes: spec.nodes.filter((n) => nodeIds.has(n.id)),
    edges: spec.edges.filter((e) => nodeIds.has(e.source) && nodeIds.has(e.target)),
    notes: (spec.notes ?? []).filter((n) => noteIds.has(n.id)),
  };
}

/** Parse clipboard text as a fragment; null when it is not one (any other text). */
export function parseFragment(text: string | null | undefined): Fragment | null {
  if (!text) return null;
  try {
    const data = JSON.parse(text) as Partial<Fragment>;
    if (data && data.ballast_fragment === 1 && Array.isArray(data.nodes) && Array.isArray(data.edges)) {
      return { ballast_fragment: 1, nodes: data.nodes, edges: data.edges, notes: Array.isArray(data.notes) ? data.notes : [] };
    }
  } catch {
    return null;
  }
  return null;
}

export interface PasteResult {
  spec: GraphSpec;
  nodeIds: string[];
  noteIds: string[];
}

/** How far a paste without a pointer on the canvas lands from the copied nodes (and from an earlier paste). */
export const PASTE_STEP = 40;

function fragmentOrigin(fragment: Fragment): Position | null {
  const points = [...fragment.nodes.map((n) => n.position), ...fragment.notes.map((n) => n.position)].filter((p): p is Position => !!p);
  if (points.length === 0) return null;
  return { x: Math.min(...points.map((p) => p.x)), y: Math.min(...points.map((p) => p.y)) };
}

/**
 * Where to move the pasted copy: its top-left corner to ``at`` (the pointer, in flow
 * coordinates) when given; else ``PASTE_STEP`` px right and down of the original, one step
 * further for as long as a node already sits exactly there (pasting twice must not stack
 * the second copy on the first).
 */
export function pasteOffset(spec: GraphSpec, fragment: Fragment, at?: Position | null): Position {
  const origin = fragmentOrigin(fragment);
  if (!origin) return { x: PASTE_STEP, y: PASTE_STEP };
  if (at) return { x: Math.round(at.x - origin.x), y: Math.round(at.y - origin.y) };
  const occupied = new Set(spec.nodes.filter((n) => n.position).map((n) => `${Math.round(n.position!.x)},${Math.round(n.position!.y)}`));
  const lands = (k: number) => fragment.nodes.some((n) => n.position && occupied.has(`${Math.round(n.position.x + k * PASTE_STEP)},${Math.round(n.position.y + k * PASTE_STEP)}`));
  let k = 1;
  while (k < 50 && lands(k)) k += 1;
  return { x: k * PASTE_STEP, y: k * PASTE_STEP };
}

/**
 * ``spec`` with ``fragment`` added: every node and note gets an id not yet used (its old id
 * as the base), edges are rewired to the new ids (edge ids, when present, renewed too), and
 * positions move by ``offset`` (default: :func:`pasteOffset`, never exactly over the
 * original). Other fields of the copied objects are kept as they were.
 */
export function pasteFragment(spec: GraphSpec, fragment: Fragment, offset: Position = pasteOffset(spec, fragment)): PasteResult {
  const taken = new Set(spec.nodes.map((n) => n.id));
  const rename = new Map<string, string>();
  const nodes = fragment.nodes.map((n) => {
    const id = freshId(n.id, taken);
    taken.add(id);
    rename.set(n.id, id);
    const copy: NodeSpec = { ...n, id };
    if (n.position) copy.position = { x: n.position.x + offset.x, y: n.position.y + offset.y };
    return copy;
  });
  const edgeIds = new Set(spec.edges.map((e) => e.id).filter((id): id is string => !!id));
  const edges: EdgeSpec[] = [];
  for (const e of fragment.edges) {
    const source = rename.get(e.source);
    const target = rename.get(e.target);
    if (source === undefined || target === undefined) continue; // only edges inside the fragment
    const copy: EdgeSpec = { ...e, source, target };
    if (e.id) {
      copy.id = freshId(e.id, edgeIds);
      edgeIds.add(copy.id);
    }
    edges.push(copy);
  }
  const noteTaken = new Set((spec.notes ?? []).map((n) => n.id));
  const notes = fragment.notes.map((n) => {
    const id = freshId(n.id, noteTaken);
    noteTaken.add(id);
    return { ...n, id, position: { x: n.position.x + offset.x, y: n.position.y + offset.y } };
  });
  const out: GraphSpec = { ...spec, nodes: [...spec.nodes, ...nodes], edges: [...spec.edges, ...edges] };
  if (notes.length > 0 || spec.notes) out.notes = [...(spec.notes ?? []), ...notes];
  return { spec: out, nodeIds: nodes.map((n) => n.id), noteIds: notes.map((n) => n.id) };
}
