// The run-alert dialog of a graph: its owner asks for an email when one of its runs fails or is parked.
import type { RunAlert } from "../api/types";
import { useEffect, useState } from "react";
import { api } from "../lib/api";
import { ErrorMessage, Modal, Skeleton } from "./ui";
import { Button } from "./Button";

/** Read and set ``graphs/<id>/alerts/`` for the signed-in user; the server says who may (403 otherwise). */
export function AlertsDialog({ graphId, graphName, onClose }: { graphId: number; graphName: string; onClose: () => void }) {
  const [alert, setAlert] = useState<RunAlert | null>(null);
  const [failed, setFailed] = useState(false);
  const [parked, setParked] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState(false);

  useEffect(() => {
    const controller = new AbortController();
    api<RunAlert>(`graphs/${graphId}/alerts/`, { signal: controller.signal })
      .then((a) => { setAlert(a); setFailed(a.on_failed); setParked(a.on_parked); })
      .catch((err: unknown) => { if (!controller.signal.aborted) setError(err); });
    return () => controller.abort();
  }, [graphId]);

  const save = async () => {
    setSaving(true);
    setError(null);
    try {
      const a = await api<RunAlert>(`graphs/${graphId}/alerts/`, { method: "PUT", body: { on_failed: failed, on_parked: parked } });
      setAlert(a);
      setSaved(true);
    } catch (err) {
      setError(err);
    } finally {
      setSaving(false);
    }
  };

  const footer = (
    <>
      <Button onClick={onClose}>{saved ? "Close" : "Cancel"}</Button>
      <Button variant="primary" onClick={() => void save()} disabled={!alert || saving}>{saving ? "Saving…" : "Save"}</Button>
    </>
  );
  return (
    <Modal title={`Email alerts for ${graphName}`} onClose={onClose} footer={footer}>
      {error ? <ErrorMessage error={error} /> : null}
      {!alert && !error ? <Skeleton lines={3} /> : null}
      {alert ? (
        <div className="form">
          <label className="check"><input type="checkbox" checked={failed} onChange={(e) => { setFailed(e.target.checked); setSaved(false); }} /> Email me when one of its runs fails</label>
          <label className="check"><input type="checkbox" checked={parked} onChange={(e) => { setParked(e.target.checked); setSaved(false); }} /> Email me when a run is parked (a step a crash interrupted is not safe to repeat: someone must decide)</label>
          {alert.email ? <p className="muted">Emails go to {alert.email}.</p> : (
            <p className="alert alert-error">Your account has no email address, so nothing can be sent: ask an administrator to add one (Admin → Users).</p>
          )}
          {saved ? <p role="status" className="muted">{alert.subscribed ? "Saved: you will get these emails." : "Saved: no more emails for this graph."}</p> : null}
        </div>
      ) : null}
    </Modal>
  );
}
