// Where the run page draws a graph's nodes: a spec saved without positions is laid out (part of the lazy canvas chunk, with dagre).
import { applyPositions } from "../builder/flow";
import { layoutPositions } from "../builder/layout";
import type { GraphSpec } from "../builder/spec";

/**
 * ``spec`` with every node placed: a spec saved without positions (imported JSON, an API
 * client) is laid out left to right (the builder's auto-layout, at default node sizes), so
 * its parallel branches show side by side rather than on the builder's fallback grid. A spec
 * whose nodes all have positions is returned as it is; a layout that throws keeps the grid.
 */
export function placedSpec(spec: GraphSpec): GraphSpec {
  if (spec.nodes.every((n) => n.position)) return spec;
  try {
    return applyPositions(spec, layoutPositions(spec, new Map(), () => []));
  } catch {
    return spec;
  }
}
