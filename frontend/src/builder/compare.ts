// A version comparison as the canvas draws it: the newer version's graph with the older one's removed parts kept as ghosts.
import type { VersionDiff } from "../api/types";
import type { CanvasDiff } from "./Canvas";
import type { GraphSpec } from "./spec";
import { edgeKey } from "./store";
import { diffNodeStatus } from "./versions/diff";

/**
 * The graph to draw for ``diff`` (from version ``older`` to ``newer``) and how each part changed:
 * every node and edge of ``newer``, plus the nodes and edges only ``older`` has (marked removed,
 * at their old positions), so a removal is seen where it was rather than only listed.
 * Node status comes from the server's diff (diffNodeStatus); edges are matched by edgeKey.
 */
export function comparisonView(older: GraphSpec, newer: GraphSpec, diff: VersionDiff): { spec: GraphSpec; marks: CanvasDiff } {
  const nodes = diffNodeStatus(diff);
  const present = new Set(newer.nodes.map((n) => n.id));
  const ghosts = older.nodes.filter((n) => nodes[n.id] === "removed" && !present.has(n.id));
  const newerEdges = new Set(newer.edges.map(edgeKey));
  const olderEdges = new Set(older.edges.map(edgeKey));
  const removedEdges = older.edges.filter((e) => !newerEdges.has(edgeKey(e)));
  const edges: Record<string, "added" | "removed"> = {};
  for (const e of newer.edges) if (!olderEdges.has(edgeKey(e))) edges[edgeKey(e)] = "added";
  for (const e of removedEdges) edges[edgeKey(e)] = "removed";
  return {
    spec: { ...newer, nodes: [...newer.nodes, ...ghosts], edges: [...newer.edges, ...removedEdges] },
    marks: { nodes, edges },
  };
}
