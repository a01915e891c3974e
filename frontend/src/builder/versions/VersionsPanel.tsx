// Version history: who published what and when; open a version read-only, diff two, restore one as the draft.
import type { GraphDetail, Page, VersionDiff, VersionInfo } from "../../api/types";
import { useCallback, useContext, useEffect, useState } from "react";
import { api, ApiError } from "../../lib/api";
import { PageContextReact } from "../../lib/context";
import "../panel/panel.css";
import { BuilderContext } from "../store";
import { DiffList } from "./DiffList";
import { Button } from "../../shell/Button";

export interface VersionsPanelProps {
  graphId: number;
  /** Open version ``n`` read-only on the canvas; null goes back to the draft. */
  onOpenVersion(n: number | null): void;
  /** Hand a diff to the canvas to colour its nodes; null clears it. */
  onShowDiff(diff: VersionDiff | null): void;
  /** The version open on the canvas (highlighted), if any. */
  openVersion?: number | null;
  /** The draft revision the canvas holds; a restore made from an older one is refused (409). Default: the stored one. */
  baseRevision?: number;
  /** Called with the new draft after a restore; default: reload the page to show it. */
  onRestored?(draft: GraphDetail): void;
}

const relative = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

/** ``"3 hours ago"`` style time since ``iso`` (``now`` for tests). */
export function timeAgo(iso: string, now: number = Date.now()): string {
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  const units: [Intl.RelativeTimeFormatUnit, number][] = [
    ["year", 31536000],
    ["month", 2592000],
    ["day", 86400],
    ["hour", 3600],
    ["minute", 60],
  ];
  for (const [unit, size] of units) if (Math.abs(seconds) >= size) return relative.format(Math.round(seconds / size), unit);
  return relative.format(seconds, "second");
}

type Load = { kind: "loading" } | { kind: "failed"; message: string } | { kind: "ready"; versions: VersionInfo[]; more: boolean };

/** The history list with compare (pick two), open and restore. */
export function VersionsPanel({ graphId, onOpenVersion, onShowDiff, openVersion = null, baseRevision, onRestored }: VersionsPanelProps) {
  const page = useContext(PageContextReact);
  const builder = useContext(BuilderContext);
  // Restoring needs the build role (the server refuses it anyway); viewing an old version read-only does not take it away.
  const canBuild = page?.user?.can.build ?? true;
  const [load, setLoad] = useState<Load>({ kind: "loading" });
  const [picked, setPicked] = useState<number[]>([]);
  const [diff, setDiff] = useState<VersionDiff | null>(null);
  const [diffState, setDiffState] = useState<{ loading: boolean; error: string | null }>({ loading: false, error: null });
  const [restoring, setRestoring] = useState<number | null>(null);
  const [restoreState, setRestoreState] = useState<{ busy: boolean; error: string | null }>({ busy: false, error: null });

  const reload = useCallback(async () => {
    setLoad({ kind: "loading" });
    try {
      const data = await api<Page<VersionInfo>>(`graphs/${graphId}/versions/?page_size=200`);
      setLoad({ kind: "ready", versions: data.results, more: data.next !== null });
    } catch (err) {
      setLoad({ kind: "failed", message: err instanceof Error ? err.message : String(err) });
    }
  }, [graphId]);

  useEffect(() => {
    void reload();
  }, [reload]);

  function toggle(n: number) {
    setPicked((p) => (p.includes(n) ? p.filter((x) => x !== n) : [...p, n].slice(-2)));
  }

  async function compare() {
    const [a, b] = [...picked].sort((x, y) => x - y);
    if (a === undefined || b === undefined) return;
    setDiffState({ loading: true, error: null });
    try {
      // ``a``/``b`` per the contract; ``from``/``to`` as the server names them.
      const d = await api<VersionDiff>(`graphs/${graphId}/diff/?a=${a}&b=${b}&from=${a}&to=${b}`);
      setDiff(d);
      setDiffState({ loading: false, error: null });
      onShowDiff(d);
    } catch (err) {
      setDiffState({ loading: false, error: err instanceof Error ? err.message : String(err) });
    }
  }

  function clearDiff() {
    setDiff(null);
    setPicked([]);
    onShowDiff(null);
  }

  async function restore(n: number) {
    setRestoreState({ busy: true, error: null });
    try {
      const base = baseRevision ?? (await api<GraphDetail>(`graphs/${graphId}/`)).revision;
      const draft = await api<GraphDetail>(`graphs/${graphId}/versions/${n}/restore/`, { method: "POST", body: { base_revision: base } });
      setRestoring(null);
      setRestoreState({ busy: false, error: null });
      if (onRestored) onRestored(draft);
      else window.location.reload();
    } catch (err) {
      let message = err instanceof Error ? err.message : String(err);
      if (err instanceof ApiError && err.status === 409) {
        const current = err.body?.current as { updated_by?: string | null; draft_updated_by?: string | null; updated_at?: string; draft_updated_at?: string } | undefined;
        const who = current?.updated_by ?? current?.draft_updated_by;
        const when = current?.updated_at ?? current?.draft_updated_at;
        message =
          `The draft was changed${who ? ` by ${who}` : ""}${when ? ` ${timeAgo(when)}` : ""} after you opened it, so it was not replaced. ` +
          "Reload the page to see that draft, then restore again if you still want to.";
      }
      setRestoreState({ busy: false, error: message });
    }
  }

  return (
    <section className="versions-panel" aria-label="Version history">
      <header className="panel-header">
        <h2>Versions</h2>
        <p className="field-help">Published versions are immutable. Pick two to compare them.</p>
      </header>
      {openVersion !== null && (
        <p className="readonly-banner">
          Viewing version {openVersion} (read only).{" "}
          <Button variant="link" onClick={() => onOpenVersion(null)}>
            Back to the draft
          </Button>
        </p>
      )}
      {load.kind === "loading" && (
        <p className="panel-empty" role="status">
          Loading versions…
        </p>
      )}
      {load.kind === "failed" && (
        <div className="panel-error" role="alert">
          Could not load the versions: {load.message}{" "}
          <Button size="small" onClick={() => void reload()}>
            Try again
          </Button>
        </div>
      )}
      {load.kind === "ready" && load.versions.length === 0 && (
        <p className="panel-empty">Nothing published yet. Publish the draft to make its first version.</p>
      )}
      {load.kind === "ready" && load.versions.length > 0 && (
        <>
          <ol className="version-list">
            {load.versions.map((v) => (
              <li key={v.number} className={`version-row${openVersion === v.number ? " is-open" : ""}`}>
                <input
                  type="checkbox"
                  id={`version-pick-${v.number}`}
                  checked={picked.includes(v.number)}
                  onChange={() => toggle(v.number)}
                  aria-label={`Compare version ${v.number}`}
                />
                <div className="version-main">
                  <label htmlFor={`version-pick-${v.number}`} className="version-title">
                    v{v.number} {v.message ? <span className="version-message">{v.message}</span> : <span className="muted">(no message)</span>}
                  </label>
                  <p className="version-meta">
                    {v.created_by ?? "someone"} · <time dateTime={v.created_at} title={new Date(v.created_at).toLocaleString()}>{timeAgo(v.created_at)}</time>
                  </p>
                </div>
                <div className="version-actions">
                  <Button size="small" onClick={() => onOpenVersion(v.number)} aria-label={`Open version ${v.number}`}>
                    Open
                  </Button>
                  {canBuild && (
                    <Button size="small" onClick={() => setRestoring(v.number)} aria-label={`Restore version ${v.number}`}>
                      Restore
                    </Button>
                  )}
                </div>
                {restoring === v.number && (
                  <div className="confirm-box" role="alertdialog" aria-labelledby={`restore-${v.number}`}>
                    <p id={`restore-${v.number}`}>
                      Make version {v.number} the new draft? The current draft is replaced (published versions stay as they are).
                    </p>
                    {restoreState.error && (
                      <p className="panel-error" role="alert">
                        {restoreState.error}
                      </p>
                    )}
                    <div className="button-row confirm-box__buttons">
                      <Button
                        onClick={() => {
                          setRestoring(null);
                          setRestoreState({ busy: false, error: null });
                        }}
                      >
                        Cancel
                      </Button>
                      <Button variant="primary" disabled={restoreState.busy} onClick={() => void restore(v.number)}>
                        {restoreState.busy ? "Restoring…" : `Restore version ${v.number}`}
                      </Button>
                    </div>
                  </div>
                )}
              </li>
            ))}
          </ol>
          {load.more && <p className="field-help">Only the latest 200 versions are listed.</p>}
          <div className="button-row">
            <Button variant="primary" disabled={picked.length !== 2 || diffState.loading} onClick={() => void compare()}>
              {diffState.loading
                ? "Comparing…"
                : picked.length === 2
                  ? `Compare v${Math.min(...picked)} and v${Math.max(...picked)}`
                  : "Compare two versions"}
            </Button>
            {diff && (
              <Button onClick={clearDiff}>
                Clear comparison
              </Button>
            )}
          </div>
          {diffState.error && (
            <p className="panel-error" role="alert">
              Could not compare: {diffState.error}
            </p>
          )}
          {diff && <DiffList diff={diff} onSelectNode={builder ? (id) => builder.select({ nodes: [id], edges: [], notes: [], field: null }) : undefined} />}
        </>
      )}
    </section>
  );
}

export default VersionsPanel;
