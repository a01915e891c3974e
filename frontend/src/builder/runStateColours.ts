// The colour of each node state in a run: one table for the canvas cards, its minimap and the run page's timeline.
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
};
