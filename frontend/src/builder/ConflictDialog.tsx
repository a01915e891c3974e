// The dialog for a draft someone else saved meanwhile: what differs, reload theirs or keep mine as a copy.
import type { StoredDraft } from "../api/types";
import { useMemo, useState } from "react";
import { diffDrafts } from "./conflict";
import { Dialog } from "./Dialog";
import type { GraphSpec } from "./spec";
import { Button } from "../shell/Button";

export function ConflictDialog({ mine, theirs, graphName, onReload, onCopy }: {
  mine: GraphSpec; theirs: StoredDraft; graphName: string; onReload: () => void; onCopy: () => Promise<void>;
}) {
  const d = useMemo(() => diffDrafts(mine, theirs.spec), [mine, theirs.spec]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const when = theirs.updated_at ? new Date(theirs.updated_at).toLocaleString() : "just now";
  const list = (ids: string[]) => (ids.length ? ids.join(", ") : "none");
  return (
    <Dialog title="Someone else saved this graph" onClose={null} wide>
      <p>
        Your changes were <strong>not saved</strong>: “{graphName}” was saved by <strong>{theirs.updated_by ?? "another user"}</strong> at {when} (revision {theirs.revision})
        after you opened it. Nothing was overwritten; choose what to do with your edit.
      </p>
      <div className="conflict">
        <section aria-label="Stored version">
          <h3>Stored ({theirs.updated_by ?? "other user"}, {when})</h3>
          <p>{theirs.spec.nodes.length} nodes, {d.edgesTheirs} edges</p>
          <p>Only here: {list(d.onlyTheirs)}</p>
        </section>
        <section aria-label="Your version">
          <h3>Yours (not saved)</h3>
          <p>{mine.nodes.length} nodes, {d.edgesMine} edges</p>
          <p>Only here: {list(d.onlyMine)}</p>
        </section>
      </div>
      <p className="muted">Nodes in both that differ: {list(d.changed)}{d.settingsDiffer ? "; graph settings differ too" : ""}.</p>
      {error && <p role="alert" className="alert">{error}</p>}
      <div className="dialog__actions">
        <Button onClick={onReload}>Load the stored version (drop mine)</Button>
        <Button variant="primary" disabled={busy}
          onClick={() => { setBusy(true); onCopy().catch((err: unknown) => { setBusy(false); setError(String(err)); }); }}>
          Keep mine as a copy
        </Button>
      </div>
    </Dialog>
  );
}
