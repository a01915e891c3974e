// What differs between two drafts of one graph, in words a person can act on (for the 409 dialog).
import type { GraphSpec } from "./spec";

export interface DraftDifference {
  onlyMine: string[]; // node ids
  onlyTheirs: string[];
  changed: string[]; // in both, with different content (layout included)
  edgesMine: number;
  edgesTheirs: number;
  settingsDiffer: boolean;
}

const stable = (v: unknown): string => JSON.stringify(v, (_, x: unknown) =>
  x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b))) : x);

/** Nodes added, removed and changed between ``mine`` and ``theirs``, edge counts, and whether anything else differs. */
export function diffDrafts(mine: GraphSpec, theirs: GraphSpec): DraftDifference {
  const a = new Map(mine.nodes.map((n) => [n.id, stable(n)]));
  const b = new Map(theirs.nodes.map((n) => [n.id, stable(n)]));
  const { nodes: _n1, edges: _e1, ...restMine } = mine;
  const { nodes: _n2, edges: _e2, ...restTheirs } = theirs;
  return {
    onlyMine: [...a.keys()].filter((id) => !b.has(id)),
    onlyTheirs: [...b.keys()].filter((id) => !a.has(id)),
    changed: [...a.keys()].filter((id) => b.has(id) && a.get(id) !== b.get(id)),
    edgesMine: mine.edges.length,
    edgesTheirs: theirs.edges.length,
    settingsDiffer: stable(restMine) !== stable(restTheirs),
  };
}
