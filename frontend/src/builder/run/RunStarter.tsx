// The builder's Run dialog: the start-run form (its own chunk, loaded when Run is first pressed) for a version or the draft.
import { Suspense, lazy, useEffect, useState } from "react";
import { api } from "../../lib/api";
import { Dialog } from "../Dialog";
import { runVersionNote, type DraftState } from "./runNote";
import type { VersionDetail } from "../../api/types";
import type { GraphSpec } from "../spec";

// The start-run form (JSON-Schema form library) loads when Run is first pressed.
const StartRunDialog = lazy(() => import("./StartRunDialog"));

/**
 * Start a run of published ``version``: its own spec is fetched (the draft's input schema may
 * already differ), then the panel's StartRunDialog shows the input form, POSTs the run and
 * opens its page.
 */
export function RunStarter({ graphId, version, onClose, draft, testInput }: {
  graphId: number; version: number; onClose: () => void;
  /** The draft's state when Run was pressed on the draft (null on a version's page). */
  draft: DraftState | null;
  /** The draft's pinned test input: the form starts with it. */
  testInput: Record<string, unknown> | null;
}) {
  const [spec, setSpec] = useState<GraphSpec | null>(null);
  const [versionHash, setVersionHash] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    api<VersionDetail>(`graphs/${graphId}/versions/${version}/`)
      .then((v) => { if (live) { setVersionHash(v.content_hash); setSpec(v.spec); } })
      .catch((err: unknown) => { if (live) setError(err instanceof Error ? err.message : String(err)); });
    return () => { live = false; };
  }, [graphId, version]);
  if (error) {
    return (
      <Dialog title={`Run version ${version}`} onClose={onClose}>
        <p role="alert" className="alert">Could not load version {version}: {error}</p>
      </Dialog>
    );
  }
  const loading = <div className="toast" role="status">Loading the run form…</div>;
  if (!spec) return loading;
  return (
    <Suspense fallback={loading}>
      <StartRunDialog graphId={graphId} spec={spec} version={version} onClose={onClose}
        note={runVersionNote(version, versionHash, draft)} initialInput={testInput ?? undefined} />
    </Suspense>
  );
}
