// Fork a run from any committed step with edited state: the state after that step in a JSON editor,
// checked against the graph's state keys as you type (errors by path), the preview of what the fork
// keeps and runs (with its cost) updated from the edited state, then the new run's page.
import type { ActionPreview, RunDetail } from "../api/types";
import { Suspense, lazy, useEffect, useMemo, useRef, useState } from "react";
import { api, ApiError } from "../lib/api";
import { ErrorMessage, Modal, Skeleton } from "../shell/ui";
import { editableState, forkPatch, serverProblems, type StateProblem } from "./actions";
import { PreviewView } from "./PreviewView";
import { Button } from "../shell/Button";

// CodeMirror (about 100 KB gzipped) loads when a fork dialog first shows a state, not with the run page.
const StateEditor = lazy(() => import("./StateEditor").then((m) => ({ default: m.StateEditor })));

/** Delay (ms) between the last keystroke and the preview of the edited state. */
export const PREVIEW_DELAY_MS = 400;

export interface ForkDialogProps {
  run: RunDetail;
  /** The step to fork from (default: the last committed top-level step). */
  stepId?: number;
  onClose(): void;
  navigate(url: string): void;
}

/** The steps a fork may start from: committed top-level steps, in creation order (not an end node: nothing follows it). */
export function forkableSteps(run: Pick<RunDetail, "steps">) {
  return run.steps.filter((s) => s.parent === null && s.status === "succeeded" && s.kind !== "end");
}

export function ForkDialog({ run, stepId, onClose, navigate }: ForkDialogProps) {
  const steps = useMemo(() => forkableSteps(run), [run]);
  const [step, setStep] = useState<number | null>(stepId ?? steps[steps.length - 1]?.id ?? null);
  // The state after the step (from an unpatched preview) and the keys a patch may write.
  const [base, setBase] = useState<{ step: number; state: Record<string, unknown>; keys: string[]; text: string } | null>(null);
  const [baseError, setBaseError] = useState<unknown>(null);
  const [text, setText] = useState("");
  const [preview, setPreview] = useState<ActionPreview | null>(null);
  const [previewing, setPreviewing] = useState(false);
  const [server, setServer] = useState<{ problems: StateProblem[]; other: string[]; message: string | null }>({ problems: [], other: [], message: null });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const sequence = useRef(0);

  // A step chosen: its state and a first preview (no patch).
  useEffect(() => {
    if (step === null) return;
    const controller = new AbortController();
    setBase(null);
    setBaseError(null);
    setPreview(null);
    api<ActionPreview>(`runs/${run.id}/fork/preview/`, { method: "POST", body: { step, state_patch: {} }, signal: controller.signal })
      .then((p) => {
        const state = p.state ?? {};
        const initial = editableState(state);
        setBase({ step, state, keys: p.state_keys ?? [], text: initial });
        setText(initial);
        setPreview(p);
        setServer({ problems: [], other: [], message: null });
      })
      .catch((err: unknown) => { if (!controller.signal.aborted) setBaseError(err); });
    return () => controller.abort();
  }, [run.id, step]);

  const local = useMemo(() => (base ? forkPatch(text, base.state, base.keys) : { patch: null, problems: [] }), [text, base]);
  const blocking = local.problems.some((p) => p.severity === "error");

  // The edited state previewed by the server (its own checks: values JSON cannot carry, the size limit).
  useEffect(() => {
    if (!base || blocking || local.patch === null) {
      setPreviewing(false);
      return;
    }
    const mine = ++sequence.current;
    // Stale from this keystroke until the server has previewed this patch: Fork waits for
    // it (enabled during the delay, a click could fork what the preview never showed, and
    // a button disabled under the pointer when the delay ends swallows the click).
    setPreviewing(true);
    const controller = new AbortController();
    const timer = window.setTimeout(() => {
      api<ActionPreview>(`runs/${run.id}/fork/preview/`, { method: "POST", body: { step: base.step, state_patch: local.patch }, signal: controller.signal })
        .then((p) => {
          if (mine !== sequence.current) return;
          setPreview(p);
          setServer({ problems: [], other: [], message: null });
        })
        .catch((err: unknown) => {
          if (mine !== sequence.current || controller.signal.aborted) return;
          if (err instanceof ApiError && err.status < 500) {
            const placed = serverProblems(err.fields, text);
            setServer({ ...placed, message: err.message });
          } else {
            setServer({ problems: [], other: [], message: err instanceof Error ? err.message : String(err) });
          }
        })
        .finally(() => { if (mine === sequence.current) setPreviewing(false); });
    }, PREVIEW_DELAY_MS);
    return () => { window.clearTimeout(timer); controller.abort(); };
    // local.patch changes with text and base (useMemo above): listed for the check, no extra runs.
  }, [run.id, text, base, blocking, local.patch]);

  const problems = useMemo(() => [...local.problems, ...(blocking ? [] : server.problems)], [local.problems, server.problems, blocking]);
  const serverBlocks = !blocking && (server.problems.length > 0 || server.message !== null);
  const patchKeys = local.patch ? Object.keys(local.patch) : [];

  async function fork() {
    if (!base || local.patch === null) return;
    setBusy(true);
    setError(null);
    try {
      const created = await api<RunDetail>(`runs/${run.id}/fork/`, { method: "POST", body: { step: base.step, state_patch: local.patch } });
      navigate(`/runs/${created.id}/`);
    } catch (err) {
      setBusy(false);
      if (err instanceof ApiError) setServer({ ...serverProblems(err.fields, text), message: err.message });
      setError(err);
    }
  }

  const chosen = steps.find((s) => s.id === step);
  return (
    <Modal title={`Fork run #${run.id}`} onClose={onClose} footer={<>
      <Button onClick={onClose}>Cancel</Button>
      <Button variant="primary" onClick={() => void fork()}
        disabled={busy || !base || blocking || serverBlocks || previewing || local.patch === null}>
        {busy ? "Forking…" : patchKeys.length > 0 ? `Fork with ${patchKeys.length} edited key${patchKeys.length === 1 ? "" : "s"}` : "Fork"}
      </Button>
    </>}>
      <div className="ra-wide">
        {steps.length === 0 ? <p className="muted">No step of this run has committed yet: there is nothing to fork from.</p> : (
          <div className="field ra-field">
            <label htmlFor="fork-step">Fork after step</label>
            <select id="fork-step" value={step ?? ""} onChange={(e) => setStep(Number(e.target.value))}>
              {steps.map((s) => <option key={s.id} value={s.id}>{s.node_id}{s.iteration > 0 ? ` #${s.iteration + 1}` : ""} (step {s.id})</option>)}
            </select>
            <span className="field-help">A new run of the same version starts from the state right after {chosen ? <code>{chosen.node_id}</code> : "that step"} committed, with your edits on top; the steps after it run anew.</span>
          </div>
        )}
        {baseError ? <ErrorMessage error={baseError} title="This step's state could not be loaded." /> : null}
        {step !== null && !base && !baseError ? <Skeleton lines={5} label="Loading the state after this step…" /> : null}
        {base ? (
          <div className="field ra-field">
            <label htmlFor="fork-state">State after <code>{chosen?.node_id}</code></label>
            <Suspense fallback={<Skeleton lines={6} label="Loading the editor…" />}>
              <StateEditor id="fork-state" initial={base.text} onChange={setText} problems={problems} ariaLabel="Fork state (JSON)" ariaDescribedBy="fork-state-help" />
            </Suspense>
            <span className="field-help" id="fork-state-help">
              Edit the values; changed keys are the fork's patch ({patchKeys.length > 0 ? patchKeys.map((k, i) => <span key={k}>{i > 0 ? ", " : ""}<code>{k}</code></span>) : "none yet"}).
              State keys of this graph: {base.keys.map((k, i) => <span key={k}>{i > 0 ? ", " : ""}<code>{k}</code></span>)}. The run's <code>input</code> stays as it was.
            </span>
            {problems.length > 0 ? (
              <ul className="ra-problems" aria-live="polite" aria-label="Problems in the state">
                {problems.map((p, i) => (
                  <li key={i} className={p.severity === "warning" ? "ra-warning" : "ra-error"}>
                    {p.path ? <code>{p.path}</code> : <span>state</span>}: {p.message}
                  </li>
                ))}
              </ul>
            ) : null}
            {!blocking && server.message && server.problems.length === 0 ? (
              <p className="field-error" role="alert">{server.message}{server.other.length > 0 ? ` ${server.other.join(" ")}` : ""}</p>
            ) : null}
          </div>
        ) : null}
        {preview && base ? (
          <div className={previewing || blocking ? "ra-stale" : undefined} aria-busy={previewing}>
            {blocking ? <p className="field-help">Fix the problems above to update the preview.</p> : null}
            <PreviewView preview={preview} />
          </div>
        ) : null}
        {error && !(error instanceof ApiError && Object.keys(error.fields).length > 0) ? <ErrorMessage error={error} title="The run was not forked." /> : null}
      </div>
    </Modal>
  );
}
