// The builder's Publish dialog: what changed, the publish checks' warnings (triggers a version breaks), and the new version.
import type { PublishCheck, Published, PublishWarning } from "../api/types";
import { useEffect, useState } from "react";
import { ApiError, api } from "../lib/api";
import { Dialog } from "./Dialog";
import { Button } from "../shell/Button";

export function PublishDialog({ graphId, flush, onClose, onPublished, onVersion, onShowTriggers }: {
  graphId: number; flush: () => Promise<boolean>; onClose: () => void; onPublished: (n: number, message: string) => void;
  /** A version was published (called before the dialog closes or shows warnings). */
  onVersion: (n: number) => void;
  onShowTriggers: () => void;
}) {
  const [message, setMessage] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [warned, setWarned] = useState<{ number: number; warnings: PublishWarning[] } | null>(null);
  // What publishing the draft would break, asked once the draft is saved: shown before the click.
  const [ahead, setAhead] = useState<PublishWarning[]>([]);
  const [checked, setChecked] = useState(false);
  useEffect(() => {
    let live = true;
    void flush()
      .then((saved) => (saved ? api<PublishCheck>(`graphs/${graphId}/publish-check/`) : { warnings: [] }))
      .then((check) => { if (live) { setAhead(check.warnings); setChecked(true); } })
      .catch(() => { if (live) setChecked(true); /* the publish answer carries the same warnings */ });
    return () => { live = false; };
  }, [flush, graphId]);
  const publish = async () => {
    setBusy(true);
    setError(null);
    try {
      if (!(await flush())) throw new Error("the draft could not be saved first");
      const v = await api<Published>(`graphs/${graphId}/versions/`, { method: "POST", body: { message } });
      onVersion(v.number);
      // A publish that breaks a trigger is done, and says so: the dialog stays to name them.
      if (v.warnings && v.warnings.length > 0 && ahead.length === 0) setWarned({ number: v.number, warnings: v.warnings });
      else onPublished(v.number, message);
    } catch (err) {
      const fields = err instanceof ApiError ? Object.entries(err.fields).map(([k, m]) => `${k}: ${m.join(", ")}`) : [];
      setError([err instanceof Error ? err.message : String(err), ...fields].join("\n"));
    } finally {
      setBusy(false);
    }
  };
  if (warned) {
    return (
      <Dialog title={`Published version ${warned.number}, with warnings`} onClose={onClose}>
        <p>
          Version {warned.number} is published, but it breaks {warned.warnings.length === 1
            ? "a trigger that follows the latest version. Its deliveries may now be refused (400) until you fix it or pin it"
            : `${warned.warnings.length} triggers that follow the latest version. Their deliveries may now be refused (400) until you fix them or pin them`}{" "}
          to an older version:
        </p>
        <PublishWarnings warnings={warned.warnings} />
        <div className="dialog__actions">
          <Button onClick={onClose}>Close</Button>
          <Button variant="primary" onClick={onShowTriggers}>Open Triggers</Button>
        </div>
      </Dialog>
    );
  }
  return (
    <Dialog title="Publish a version" onClose={onClose}>
      <form onSubmit={(e) => { e.preventDefault(); void publish(); }} data-checked={checked ? "true" : undefined}>
        <label className="field">
          <span>What changed?</span>
          <textarea value={message} onChange={(e) => setMessage(e.target.value)} rows={3} autoFocus
            placeholder="e.g. Route urgent tickets to on-call" />
        </label>
        <p className="muted">The draft is saved, then published as an immutable version that runs can use.</p>
        {ahead.length > 0 && (
          <div className="publish-ahead">
            <p>
              <strong>This version breaks {ahead.length === 1 ? "a trigger that follows" : `${ahead.length} triggers that follow`} the latest version.</strong>{" "}
              You can still publish; then fix {ahead.length === 1 ? "it" : "them"} in Triggers, or first pin {ahead.length === 1 ? "it" : "them"} to the current version.
            </p>
            <PublishWarnings warnings={ahead} />
          </div>
        )}
        {error && <pre role="alert" className="alert">{error}</pre>}
        <div className="dialog__actions">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy}>{busy ? "Publishing…" : "Publish"}</Button>
        </div>
      </form>
    </Dialog>
  );
}

/** Each trigger a version breaks, named, with the fields at fault. */
function PublishWarnings({ warnings }: { warnings: PublishWarning[] }) {
  return (
    <ul className="publish-warnings" role="alert">
      {warnings.map((w, i) => (
        <li key={i}>
          <strong>{w.subject.kind === "webhook" ? "Webhook" : w.subject.kind ?? "Trigger"} “{w.subject.name ?? w.subject.id}”</strong>:{" "}
          {Object.entries(w.fields).map(([k, m]) => `${k}: ${m.join(" ")}`).join("; ") || w.message}
        </li>
      ))}
    </ul>
  );
}
