// The run actions' dialogs: cancel (with a reason), resume or retry after a preview, and choose a run to compare with.
import type { ActionPreview, CursorPage, RunDetail, RunSummary } from "../api/types";
import { useEffect, useState } from "react";
import { api } from "../lib/api";
import { formatDateTime, formatUsd } from "../shell/format";
import { ErrorMessage, Modal, Skeleton, StatusBadge } from "../shell/ui";
import { compareUrl } from "./actions";
import { PreviewView } from "./PreviewView";
import { Button } from "../shell/Button";

/** Cancel the run, with an optional reason written to its error and the audit log. */
export function CancelDialog({ run, onClose, onDone }: { run: RunDetail; onClose(): void; onDone(): void }) {
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const open = run.steps.filter((s) => s.parent === null && ["pending", "running", "waiting", "parked", "suspended"].includes(s.status));
  async function cancel() {
    setBusy(true);
    setError(null);
    try {
      await api(`runs/${run.id}/cancel/`, { method: "POST", body: { reason } });
      onDone();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }
  return (
    <Modal title={`Cancel run #${run.id}?`} onClose={onClose} footer={<>
      <Button onClick={onClose}>Keep running</Button>
      <Button variant="danger" onClick={() => void cancel()} disabled={busy}>{busy ? "Cancelling…" : "Cancel run"}</Button>
    </>}>
      <p>
        The run stops for good: {open.length > 0 ? <>its open step{open.length === 1 ? "" : "s"} {open.map((s, i) => <span key={s.id}>{i > 0 ? ", " : ""}<code>{s.node_id}</code></span>)} {open.length === 1 ? "is" : "are"} cancelled</> : "nothing more is started"};
        a step that is running keeps what it commits but starts nothing after it. Committed steps and their spend stay.
      </p>
      <div className="field ra-field">
        <label htmlFor="cancel-reason">Reason (optional)</label>
        <input id="cancel-reason" value={reason} maxLength={1000} onChange={(e) => setReason(e.target.value)} placeholder="Why, for the audit log" />
      </div>
      {error ? <ErrorMessage error={error} title="The run was not cancelled." /> : null}
    </Modal>
  );
}

/**
 * Resume or retry after seeing what it does: the preview (POST .../<action>/preview/) is loaded when the
 * dialog opens, and the action is posted only from its confirm button.
 */
export function PreviewActionDialog({ run, action, onClose, onDone }: {
  run: RunDetail;
  action: "resume" | "retry";
  onClose(): void;
  onDone(): void;
}) {
  const [preview, setPreview] = useState<ActionPreview | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    setLoadError(null);
    api<ActionPreview>(`runs/${run.id}/${action}/preview/`, { method: "POST", signal: controller.signal })
      .then(setPreview)
      .catch((err: unknown) => { if (!controller.signal.aborted) setLoadError(err); });
    return () => controller.abort();
  }, [run.id, action, tick]);
  async function go() {
    setBusy(true);
    setError(null);
    try {
      await api(`runs/${run.id}/${action}/`, { method: "POST", body: {} });
      onDone();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }
  const title = action === "retry" ? `Retry run #${run.id} from the failed step` : `Resume run #${run.id}`;
  return (
    <Modal title={title} onClose={onClose} footer={<>
      <Button onClick={onClose}>Cancel</Button>
      <Button variant="primary" onClick={() => void go()} disabled={busy || !preview}>
        {busy ? (action === "retry" ? "Retrying…" : "Resuming…") : action === "retry" ? "Retry" : "Resume"}
      </Button>
    </>}>
      <div className="ra-wide">
        {loadError ? <ErrorMessage error={loadError} title="The preview could not be loaded." onRetry={() => setTick((t) => t + 1)} /> : null}
        {!preview && !loadError ? <Skeleton lines={3} label="Working out what runs again…" /> : null}
        {preview ? <PreviewView preview={preview} /> : null}
        {error ? <ErrorMessage error={error} title={`The run was not ${action === "retry" ? "retried" : "resumed"}.`} /> : null}
      </div>
    </Modal>
  );
}

/** Choose another run of the same graph to compare with; opens the compare page. */
export function CompareDialog({ run, onClose, navigate }: { run: RunDetail; onClose(): void; navigate(url: string): void }) {
  const [runs, setRuns] = useState<RunSummary[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [other, setOther] = useState("");
  useEffect(() => {
    const controller = new AbortController();
    api<CursorPage<RunSummary>>(`runs/?graph=${run.graph}&page_size=20`, { signal: controller.signal })
      .then((page) => setRuns(page.results.filter((r) => r.id !== run.id)))
      .catch((err: unknown) => { if (!controller.signal.aborted) setError(err); });
    return () => controller.abort();
  }, [run.graph, run.id]);
  const typed = /^\d+$/.test(other.trim()) ? Number(other.trim()) : null;
  return (
    <Modal title={`Compare run #${run.id} with…`} onClose={onClose} footer={<>
      <Button onClick={onClose}>Cancel</Button>
      <Button variant="primary" disabled={typed === null || typed === run.id} onClick={() => typed !== null && navigate(compareUrl(run.id, typed))}>Compare</Button>
    </>}>
      <div className="field ra-field">
        <label htmlFor="compare-other">Run id</label>
        <input id="compare-other" inputMode="numeric" value={other} onChange={(e) => setOther(e.target.value)} placeholder="e.g. 42" />
        <span className="field-help">Any run of “{run.graph_name}” you may read, or pick one of the latest:</span>
      </div>
      {error ? <ErrorMessage error={error} title="The graph's runs could not be loaded." /> : null}
      {!runs && !error ? <Skeleton lines={4} variant="table" label="Loading runs…" /> : null}
      {runs && runs.length === 0 ? <p className="muted">No other run of this graph yet.</p> : null}
      {runs && runs.length > 0 ? (
        <ul className="ra-run-pick" aria-label="Latest runs of this graph">
          {runs.slice(0, 8).map((r) => (
            <li key={r.id}>
              <Button variant="ghost" size="small" onClick={() => navigate(compareUrl(run.id, r.id))}>
                #{r.id} <StatusBadge status={r.status} /> <span className="muted small">v{r.version} · {formatDateTime(r.created_at)} · {formatUsd(r.cost_usd)}</span>
              </Button>
            </li>
          ))}
        </ul>
      ) : null}
    </Modal>
  );
}
