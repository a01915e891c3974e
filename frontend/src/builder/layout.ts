// One-click auto-layout with @dagrejs/dagre (left to right) that keeps each node's output handle order.
import dagre from "@dagrejs/dagre";
import type { GraphSpec, Position } from "./spec";

export interface Size { width: number; height: number }

/**
 * New top-left positions for every node of ``spec``, laid out left to right.
 *
 * ``sizes`` are React Flow's measured sizes (lay out only after measuring: a missing size
 * falls back to 200x80). ``handleOrder(id)`` lists a node's output handles top to bottom;
 * the targets of one node's handles are placed in that order, so branches do not cross
 * (dagre's order constraints, then a final pass that guarantees it). Throws whatever
 * dagre throws; the caller keeps the old positions then.
 */
export function layoutPositions(spec: GraphSpec, sizes: ReadonlyMap<string, Size>,
  handleOrder: (nodeId: string) => readonly string[]): Map<string, Position> {
  const size = (id: string): Size => sizes.get(id) ?? { width: 200, height: 80 };
  const ids = new Set(spec.nodes.map((n) => n.id));
  // Targets of each node in handle order (unnamed handle first, then the declared order).
  const ordered = new Map<string, string[]>();
  for (const n of spec.nodes) {
    const order = ["", ...handleOrder(n.id)];
    const out = spec.edges
      .map((e, i) => ({ e, i }))
      .filter(({ e }) => e.source === n.id && ids.has(e.target) && e.target !== n.id)
      .sort((a, b) => rank(order, a.e.source_handle) - rank(order, b.e.source_handle) || a.i - b.i)
      .map(({ e }) => e.target);
    ordered.set(n.id, [...new Set(out)]);
  }
  const run = (constraints: { left: string; right: string }[]) => {
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "LR", nodesep: 40, ranksep: 90, marginx: 20, marginy: 20 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const n of spec.nodes) g.setNode(n.id, { ...size(n.id) });
    // Edges in handle order: dagre's initial ordering follows insertion order.
    for (const [source, targets] of ordered) targets.forEach((t, i) => g.setEdge(source, t, {}, `${source}->${t}#${i}`));
    dagre.layout(g, constraints.length ? { constraints } : {});
    return g;
  };
  const constraints: { left: string; right: string }[] = [];
  for (const targets of ordered.values()) {
    for (let i = 1; i < targets.length; i++) constraints.push({ left: targets[i - 1] as string, right: targets[i] as string });
  }
  let g;
  try {
    g = run(constraints);
  } catch {
    g = run([]); // contradictory constraints (two routers sharing targets in opposite order)
  }
  const centre = new Map<string, { x: number; y: number }>();
  for (const n of spec.nodes) {
    const v = g.node(n.id) as { x: number; y: number } | undefined;
    if (!v || !Number.isFinite(v.x) || !Number.isFinite(v.y)) throw new Error(`layout gave no position for ${n.id}`);
    centre.set(n.id, { x: v.x, y: v.y });
  }
  // Guarantee: among one node's targets that share a column, the y slots go in handle order.
  for (const targets of ordered.values()) {
    const byColumn = new Map<number, string[]>();
    for (const t of targets) {
      const x = Math.round((centre.get(t) as { x: number }).x);
      byColumn.set(x, [...(byColumn.get(x) ?? []), t]);
    }
    for (const column of byColumn.values()) {
      if (column.length < 2) continue;
      const slots = column.map((t) => (centre.get(t) as { y: number }).y).sort((a, b) => a - b);
      column.forEach((t, i) => ((centre.get(t) as { y: number }).y = slots[i] as number));
    }
  }
  const out = new Map<string, Position>();
  for (const n of spec.nodes) {
    const c = centre.get(n.id) as { x: number; y: number };
    const s = size(n.id);
    out.set(n.id, { x: Math.round(c.x - s.width / 2), y: Math.round(c.y - s.height / 2) });
  }
  return out;
}

function rank(order: readonly string[], handle: string | null | undefined): number {
  const i = order.indexOf(handle ?? "");
  return i < 0 ? order.length : i;
}
