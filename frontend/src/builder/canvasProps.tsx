// What the canvas hands React Flow that never changes: node and edge types, minimap colours, key lists, the fit icon, module constants so React Flow's store does not update on every render.
import { type MouseEvent } from "react";
import { type BallastFlowNode, type FlowNode } from "./flow";
import { NodeCard } from "./NodeCard";
import { EDGE_ARROW, FlowEdge } from "./FlowEdge";
import { NoteNode } from "./NoteNode";
import { preloadNodePanel } from "./panel/NodePanelLazy";
import { RUN_STATE_COLOURS } from "./runStateColours";

export const nodeTypes = { ballast: NodeCard, note: NoteNode };

// One edge type: a smooth step, or a detour below the nodes for a loop back (FlowEdge.tsx).
export const edgeTypes = { ballast: FlowEdge };

/** The minimap shows what the canvas marks: a compared version's change, else an error, else grey. */
const DIFF_COLOURS = { added: "#16a34a", removed: "#dc2626", changed: "#d97706" } as const;

function minimapColour(n: BallastFlowNode): string {
  if (n.data.run) return RUN_STATE_COLOURS[n.data.run.state];
  if (n.data.diff) return DIFF_COLOURS[n.data.diff];
  return n.data.errors.length ? "#dc2626" : "#94a3b8";
}

export function minimapNodeColour(n: FlowNode): string {
  return n.type === "note" ? "#fde68a" : minimapColour(n);
}

// Props handed to React Flow are module constants: it copies most props into its store when
// their identity changes, and every store update re-runs every node's, edge's and minimap
// node's selector. A fresh object or function per render (the canvas renders on every drag
// frame) meant two extra store updates per frame and all 300 minimap nodes re-rendering.
export const DEFAULT_EDGE_OPTIONS = { type: "ballast", markerEnd: EDGE_ARROW } as const;

export const PRO_OPTIONS = { hideAttribution: true } as const;

export const DELETE_KEYS = ["Delete", "Backspace"];

export const MULTI_SELECT_KEYS = ["Shift", "Meta", "Control"];

/** React Flow's own fit-view icon (its Controls draw ours in its place: our fit, same look). */
export function FitViewIcon() {
  return (
    <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 30" aria-hidden="true">
      <path d="M3.692 4.63c0-.53.4-.938.939-.938h5.215V0H4.708C2.13 0 0 2.054 0 4.63v5.216h3.692V4.631zM27.354 0h-5.2v3.692h5.17c.53 0 .984.4.984.939v5.215H32V4.631A4.624 4.624 0 0027.354 0zm.954 24.83c0 .532-.4.94-.939.94h-5.215v3.768h5.215c2.577 0 4.631-2.13 4.631-4.707v-5.139h-3.692v5.139zm-23.677.94c-.531 0-.939-.4-.939-.94v-5.138H0v5.139c0 2.577 2.13 4.707 4.708 4.707h5.138V25.77H4.631z" />
    </svg>
  );
}

/** The pointer resting on a node (no button held): fetch the node panel's chunk before the click. */
export function preloadPanelOnHover(event: MouseEvent): void {
  if (event.buttons === 0) void preloadNodePanel();
}
