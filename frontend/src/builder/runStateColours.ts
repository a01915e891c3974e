// The colour and the words of each node state in a run: one table each for the canvas cards, its minimap, the legend and the timeline.
import type { NodeRunMark } from "./flow";

/** Accent colour per run state (the card's border and pill, the minimap dot, the timeline bar). */
export const RUN_STATE_COLOURS: Readonly<Record<NodeRunMark["state"], string>> = {
  pending: "#94a3b8",
  running: "#2563eb",
  succeeded: "#16a34a",
  failed: "#dc2626",
  waiting: "#d97706",
  skipped: "#cbd5e1",
  parked: "#c2410c",
  retrying: "#9333ea",
  interrupted: "#be185d",
  cancelled: "#6b7280",
  kept: "#0d9488",
};

/**
 * The words a card's state pill shows (the run page's legend uses the same): a node that has
 * no step yet is "not started", one a condition or an ended run ruled out "not taken", a fork's
 * node whose result came from its source run "kept"; the other states are named as they are.
 */
export const RUN_STATE_LABELS: Readonly<Record<NodeRunMark["state"], string>> = {
  pending: "not started",
  running: "running",
  succeeded: "succeeded",
  failed: "failed",
  waiting: "waiting",
  skipped: "not taken",
  parked: "parked",
  retrying: "retrying",
  interrupted: "interrupted",
  cancelled: "cancelled",
  kept: "kept",
};
