// Re-read a run when a running step's lease runs out: a worker that dies commits no event, so
// without this the page would show "running" until recovery, never "interrupted".
import { useEffect } from "react";
import type { StepSummary } from "../api/types";

/** Bounds of the wait before the next check, in ms (a heartbeat moves the lease on, so checks repeat). */
export const LEASE_CHECK_MIN_MS = 1_000;
export const LEASE_CHECK_MAX_MS = 15_000;
/** Read a little after the expiry, so the server sees the lease as run out. */
export const LEASE_CHECK_MARGIN_MS = 250;

/** What the watch reads of a step (GET /runs/<id>/'s steps). */
type LeasedStep = Pick<StepSummary, "status"> & Partial<Pick<StepSummary, "worker_alive" | "lease_expires_at">>;

/**
 * Milliseconds until the run should be read again to learn whether a running step's worker
 * is still alive, or null when no step runs on a live worker (nothing to watch: a step shown
 * interrupted changes only through recovery, which commits an event). The earliest lease
 * expiry of the running steps plus a margin, clamped to [LEASE_CHECK_MIN_MS,
 * LEASE_CHECK_MAX_MS] so a clock skew between browser and server cannot make it spin or stall.
 */
export function nextLeaseCheck(steps: readonly LeasedStep[] | undefined, nowMs: number): number | null {
  let earliest: number | null = null;
  for (const s of steps ?? []) {
    if (s.status !== "running" || s.worker_alive === false) continue;
    const at = s.lease_expires_at ? Date.parse(s.lease_expires_at) : Number.NaN;
    const wait = Number.isNaN(at) ? LEASE_CHECK_MAX_MS : at - nowMs + LEASE_CHECK_MARGIN_MS;
    earliest = earliest === null ? wait : Math.min(earliest, wait);
  }
  if (earliest === null) return null;
  return Math.min(LEASE_CHECK_MAX_MS, Math.max(LEASE_CHECK_MIN_MS, earliest));
}

/**
 * Calls ``reload`` when the earliest lease of ``steps``' running steps runs out (see
 * nextLeaseCheck): the server then works out from the lease and the worker's heartbeat
 * whether the run is interrupted. Rescheduled whenever ``steps`` changes (each reload).
 */
export function useLeaseWatch(steps: readonly LeasedStep[] | undefined, reload: () => void): void {
  useEffect(() => {
    const wait = nextLeaseCheck(steps, Date.now());
    if (wait === null) return;
    const timer = setTimeout(reload, wait);
    return () => clearTimeout(timer);
  }, [steps, reload]);
}
