// Formatting shared by the pages: dates, durations, money, statuses.

import { formatBetween, formatDateTime as formatWhen } from "../lib/time";

/** "2026-12-01 20:31" in the browser's time zone; "—" for null (lib/time's formatDateTime to the minute: the run pages show milliseconds). */
export function formatDateTime(iso: string | null | undefined): string {
  return formatWhen(iso, "minute");
}

/** The time between two ISO times as "850 ms", "12.3 s", "4 min 05 s", "2 h 03 min"; "—" when either is missing (lib/time's formatBetween). */
export const formatDuration: (start: string | null | undefined, end: string | null | undefined) => string = formatBetween;

/** A decimal dollar amount from the API ("0.001200") as "$0.0012"; "—" for null. Small amounts keep 4 significant digits. */
export function formatUsd(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === "") return "—";
  const n = typeof value === "number" ? value : Number(value);
  if (!Number.isFinite(n)) return String(value);
  if (n === 0) return "$0";
  if (Math.abs(n) >= 1) return `$${n.toFixed(2)}`;
  return `$${Number(n.toPrecision(4)).toString()}`;
}

/**
 * Spend from the cost reports, where some attempts may have no known price: their cost is
 * unknown, never $0. ``usd`` is the priced sum; ``unpriced`` how many of ``attempts`` are
 * unpriced. All unpriced: "unknown"; some: "$0.012 + unknown"; none: ``formatUsd(usd)``.
 */
export function formatSpend(usd: string | number | null | undefined, unpriced = 0, attempts = 0): string {
  if (unpriced > 0 && unpriced >= attempts) return "unknown";
  if (unpriced > 0) return `${formatUsd(usd)} + unknown`;
  return formatUsd(usd);
}

/** 12345 -> "12,345 tokens", 1 -> "1 token"; "—" for null. */
export function formatTokens(tokens: number | null | undefined): string {
  if (tokens === null || tokens === undefined) return "—";
  return `${tokens.toLocaleString("en-US")} token${tokens === 1 ? "" : "s"}`;
}

/** A cost estimate (the validation's per-node or costliest-path figure): dollars and tokens. */
export interface CostFigure {
  usd: string | number | null;
  tokens: number | null;
}

/**
 * The one way the builder shows an estimate, on a node card, in its panel and in the
 * graph's costliest path: "$0.004 · 1,200 tokens" (an unpriced model: "— · 1,200 tokens");
 * "—" without an estimate.
 */
export function formatCost(figure: CostFigure | null | undefined): string {
  if (!figure) return "—";
  return `${formatUsd(figure.usd)} · ${formatTokens(figure.tokens)}`;
}

/** The version a run ran, as a list or a comparison names it: "v3", or "test" for a node-test run (its hidden snapshot is numbered 0: no published version). */
export function versionText(run: { version: number; is_test?: boolean }): string {
  return run.is_test ? "test" : `v${run.version}`;
}

/**
 * Who started a run, the same words in the run list and on its page: the user, else where it
 * came from ("command line"), else "—"; a run a trigger started names the trigger first and
 * the user it ran as after it ("webhook orders, as pat").
 */
export function startedBy(run: { created_by: string | null; started_from?: string | null; source?: string }): string {
  const who = run.created_by ?? run.started_from ?? null;
  if (run.source) return who ? `${run.source}, as ${who}` : run.source;
  return who ?? "—";
}

/** A run or step status, e.g. "waiting_approval", as words: "waiting approval". */
export function statusLabel(status: string): string {
  return status.replace(/_/g, " ");
}

/**
 * The status to show for a run: "interrupted" while a running step's worker stopped
 * heartbeating (the API's ``interrupted``), "waiting_for_decision" for a run parked after a
 * crash (``waiting_for: "decision"``: retry, skip or fail), "waiting_at_approval" for one at
 * an approval gate; else its status.
 */
export function runDisplayStatus(run: { status: string; waiting_for?: string | null; interrupted?: boolean }): string {
  if (run.interrupted) return "interrupted";
  if (run.waiting_for === "decision") return "waiting_for_decision";
  if (run.waiting_for === "approval" && run.status === "waiting") return "waiting_at_approval";
  return run.status;
}

/** Where a run waits in its graph's line (the API's ``queue``: flow control across runs). */
export interface QueuePlace {
  position: number;
  limit: string;
  key: string | null;
  max: number | null;
}

/** "position 3" in line: the short form for lists, beside the queued badge. */
export function queuePosition(queue: QueuePlace): string {
  return `position ${queue.position}`;
}

/** Why a queued run waits: which limit of its graph holds it. */
export function queueReason(queue: QueuePlace): string {
  switch (queue.limit) {
    case "max_concurrent_runs":
      return `the graph allows ${queue.max ?? "?"} active run${queue.max === 1 ? "" : "s"} at a time`;
    case "concurrency_key":
      return `concurrency key ${JSON.stringify(queue.key)} allows ${queue.max ?? "?"} active run${queue.max === 1 ? "" : "s"} at a time`;
    case "schedule_overlap":
      return "its schedule queues a tick behind the previous run (overlap policy queue)";
    default:
      return "a place is free: it is admitted at the next claim";
  }
}

/** The status to show for a step: "interrupted" for a running step whose worker is not alive. */
export function stepDisplayStatus(step: { status: string; worker_alive?: boolean | null }): string {
  return step.status === "running" && step.worker_alive === false ? "interrupted" : step.status;
}
