// The colour and the words of each node state in a run: one table each for the canvas cards, its minimap, the legend and the timeline.
import { STATUS_TOKENS } from "../lib/statusTokens";
import type { NodeRunMark } from "./flow";

const STATES = ["pending", "running", "succeeded", "failed", "waiting", "skipped", "parked", "retrying", "interrupted", "cancelled", "kept"] as const satisfies readonly NodeRunMark["state"][];

/** Accent colour per run state (the minimap dot, the timeline bar): the status tokens' accents (lib/statusTokens), never colours of its own. */
export const RUN_STATE_COLOURS: Readonly<Record<NodeRunMark["state"], string>> =
  Object.fromEntries(STATES.map((s) => [s, STATUS_TOKENS[s].accent])) as Record<NodeRunMark["state"], string>;

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
