// The run page's header actions: cancel, resume, retry from the failed step, fork from a step with edited
// state, and compare with another run. A button shows only when GET /runs/<id>/actions/ says the user may
// take that action now (the same roles and statuses the API enforces; it refuses anyway).
import type { RunActionsAllowed, RunDetail } from "../api/types";
import { useCallback, useEffect, useRef, useState } from "react";
import { api } from "../lib/api";
import { retryAdvice } from "./actions";
import { ForkDialog } from "./ForkDialog";
import { CancelDialog, CompareDialog, PreviewActionDialog } from "./RunActionDialogs";
import "./runs.css";
import { Button } from "../shell/Button";

type Open = { kind: "cancel" } | { kind: "resume" } | { kind: "retry" } | { kind: "fork"; step?: number } | { kind: "compare" } | null;

export interface RunActionsProps {
  run: RunDetail;
  /** Called after an action changed the run (reload it). */
  onChanged?(): void;
  /** Where links go (default: the browser navigates). */
  navigate?(url: string): void;
  /**
   * A step to fork from, asked for outside the header (the step inspector's "Fork from this
   * step"): while set, the fork dialog is open on it; ``onForkClosed`` is called when it closes.
   */
  forkStep?: number | null;
  onForkClosed?(): void;
  /** Told what the user may do now (each time GET runs/<id>/actions/ answers; null when it failed). */
  onAllowed?(allowed: RunActionsAllowed | null): void;
}

/** Which buttons show, in order: the allowed actions (cancel only while the run can still end otherwise). */
export function visibleActions(allowed: RunActionsAllowed | null): ("cancel" | "resume" | "retry" | "fork")[] {
  if (!allowed) return [];
  return (["retry", "resume", "fork", "cancel"] as const).filter((a) => {
    // A failed run is retried from its failed step: "Resume" would do the same, so only one shows.
    if (a === "resume" && allowed.status === "failed" && allowed.retry.allowed) return false;
    return allowed[a].allowed;
  });
}

export function RunActions({ run, onChanged, navigate, forkStep, onForkClosed, onAllowed }: RunActionsProps) {
  const go = navigate ?? ((url: string) => window.location.assign(url));
  const [allowed, setAllowedState] = useState<RunActionsAllowed | null>(null);
  const [chosen, setOpen] = useState<Open>(null);
  // A fork asked for from outside wins over the header's own dialogs while it is open.
  const open: Open = forkStep !== null && forkStep !== undefined ? { kind: "fork", step: forkStep } : chosen;
  const onAllowedRef = useRef(onAllowed);
  onAllowedRef.current = onAllowed;
  const setAllowed = useCallback((a: RunActionsAllowed | null) => {
    setAllowedState(a);
    onAllowedRef.current?.(a);
  }, []);
  const anyStepDone = run.steps.some((s) => s.status === "succeeded");

  // Asked again when the run's status changes (or a step commits: fork needs one).
  useEffect(() => {
    const controller = new AbortController();
    api<RunActionsAllowed>(`runs/${run.id}/actions/`, { signal: controller.signal })
      .then(setAllowed)
      .catch(() => { if (!controller.signal.aborted) setAllowed(null); });
    return () => controller.abort();
  }, [run.id, run.status, anyStepDone, setAllowed]);

  const done = () => {
    setOpen(null);
    onChanged?.();
  };
  const closeFork = () => {
    setOpen(null);
    if (forkStep !== null && forkStep !== undefined) onForkClosed?.();
  };
  const shown = visibleActions(allowed);
  // A deterministic error would come back: Retry is then not the suggested next step.
  const advice = retryAdvice(run.error);
  return (
    <>
      {shown.includes("retry") ? (
        <Button variant={advice ? "default" : "primary"} onClick={() => setOpen({ kind: "retry" })}
          title={advice ?? "Run the failed step again, keeping the steps before it and their spend"}>Retry from failed step</Button>
      ) : null}
      {shown.includes("resume") ? <Button variant="primary" onClick={() => setOpen({ kind: "resume" })}>Resume</Button> : null}
      {shown.includes("fork") ? <Button onClick={() => setOpen({ kind: "fork" })}>Fork…</Button> : null}
      {/* A node-test run ran a one-node harness, not the graph: there is nothing to compare it with. */}
      {run.is_test ? null : <Button onClick={() => setOpen({ kind: "compare" })}>Compare…</Button>}
      {shown.includes("cancel") ? <Button variant="danger-ghost" onClick={() => setOpen({ kind: "cancel" })}>Cancel run</Button> : null}
      {open?.kind === "cancel" ? <CancelDialog run={run} onClose={() => setOpen(null)} onDone={done} /> : null}
      {open?.kind === "resume" || open?.kind === "retry" ? <PreviewActionDialog run={run} action={open.kind} onClose={() => setOpen(null)} onDone={done} /> : null}
      {open?.kind === "fork" ? <ForkDialog key={open.step ?? "last"} run={run} stepId={open.step} onClose={closeFork} navigate={go} /> : null}
      {open?.kind === "compare" ? <CompareDialog run={run} onClose={() => setOpen(null)} navigate={go} /> : null}
    </>
  );
}

export default RunActions;
