// The builder page (/graphs/<id>/): loads the graph, the node-kind catalogue and validation; canvas, palette, side panel.
import type { GraphDetail, NodeKindInfo, PublishWarning, StoredDraft, VersionDiff } from "../api/types";
import { ReactFlowProvider } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { Fragment, Suspense, lazy, useCallback, useDeferredValue, useEffect, useMemo, useRef, useState } from "react";
import { ApiError, api } from "../lib/api";
import { usePageContext } from "../lib/context";
import { Canvas, SHORTCUTS, type CanvasDiff } from "./Canvas";
import { comparisonView } from "./compare";
import { diffDrafts } from "./conflict";
import { Dialog } from "./Dialog";
import { ErrorsPanel } from "./ErrorsPanel";
import { Palette } from "./Palette";
import { draftNotice, publishBlocked as publishBlockedReason, runBlocked, runVersionNote, type DraftState } from "./run/runNote";
import { takeBuilderLoad, versionParam } from "./load";
import type { GraphSpec } from "./spec";
import { BuilderContext, useBuilderState } from "./store";
import { useAutosave, type SaveStatus } from "./useAutosave";
import { useValidation } from "./useValidation";
import "./builder.css";

// The side panel (JSON-Schema forms, code editors) is its own chunk: the canvas draws
// without waiting for those libraries to download and compile.
const SidePanel = lazy(() => import("./panel/SidePanel"));
// The start-run form (JSON-Schema form library) loads when Run is first pressed.
const StartRunDialog = lazy(() => import("./run/StartRunDialog"));
const VersionsPanel = lazy(() => import("./versions/VersionsPanel"));
const TriggersPanel = lazy(() => import("./triggers/TriggersPanel"));

interface Loaded {
  graph: GraphDetail;
  catalogue: NodeKindInfo[];
  /** Set when viewing a published version (read-only). */
  version: number | null;
}

/** True when the URL asks for the version history to be open (``?history=1``, kept when opening a version). */
function historyParam(): boolean {
  return new URLSearchParams(window.location.search).get("history") === "1";
}

/** Two versions compared on the canvas: the server's diff and what each node and edge is marked. */
interface Comparison {
  diff: VersionDiff;
  marks: CanvasDiff;
}

const EMPTY_SPEC: GraphSpec = { name: "", nodes: [], edges: [] };
const PANEL_LOADING = <aside className="side-panel muted" aria-busy="true">Loading…</aside>;


export default function BuilderPage(props: Record<string, unknown>) {
  const graphId = Number(props.graphId);
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const version = versionParam();
    // Usually already in flight: the entry chunk started them (builder/load.ts).
    const fetches = takeBuilderLoad(graphId, version);
    Promise.all([fetches.graph, fetches.kinds, fetches.version])
      .then(([graph, kinds, v]) => {
        // Older servers call the draft ``draft``; the builder API calls it ``spec``.
        const draft = (graph.spec ?? (graph as unknown as { draft: GraphSpec }).draft) as GraphSpec;
        const spec = v ? v.spec : { ...draft, nodes: draft.nodes ?? [], edges: draft.edges ?? [], name: draft.name ?? graph.name };
        const same = !v && spec.nodes === draft.nodes && spec.edges === draft.edges && spec.name === draft.name;
        setLoaded({ graph: { ...graph, spec: same ? draft : spec, revision: graph.revision ?? 0 }, catalogue: kinds.kinds, version });
      })
      .catch((err: unknown) => setError(err instanceof Error ? err.message : String(err)));
  }, [graphId]);
  if (error) return <main className="page"><p role="alert" className="alert">Could not open this graph: {error}</p></main>;
  if (!loaded) return <div className="page-loading" role="status">Loading the graph…</div>;
  return <Builder key={`${loaded.graph.id}:${loaded.version ?? "draft"}`} loaded={loaded} />;
}

const STATUS_TEXT: Record<SaveStatus, string> = {
  saved: "All changes saved",
  unsaved: "Unsaved changes",
  saving: "Saving…",
  conflict: "Not saved: edited elsewhere",
  error: "Save failed, retrying",
};

function Builder({ loaded }: { loaded: Loaded }) {
  const ctx = usePageContext();
  const { graph, catalogue, version } = loaded;
  const readOnly = !(ctx.user?.can.build ?? false) || version !== null;
  const base = useBuilderState(graph.spec, { readOnly, catalogue, validation: null });
  const validation = useValidation(base.spec);
  const builder = useMemo(() => ({ ...base, validation: validation.result }), [base, validation.result]);
  // The side panel (forms, code editors) follows at low priority, so a click or a drag on
  // the canvas never waits for it: React renders it when the canvas is done, interruptibly.
  const deferred = useDeferredValue(builder);
  // While a pointer is down on the canvas (a drag, a box selection) the panel keeps what it
  // shows; it catches up when the pointer is released, so no form renders mid-drag.
  const [pointerDown, setPointerDown] = useState(false);
  const panelState = useRef(deferred);
  if (!pointerDown) panelState.current = deferred;
  useEffect(() => {
    if (!pointerDown) return;
    const up = () => setPointerDown(false);
    window.addEventListener("pointerup", up);
    window.addEventListener("pointercancel", up);
    return () => { window.removeEventListener("pointerup", up); window.removeEventListener("pointercancel", up); };
  }, [pointerDown]);
  // The side panel's chunk (graph settings, code editor) is fetched once the canvas has drawn
  // every node and no pointer is down, so neither its download and evaluation nor its first
  // render competes with the canvas's first render or a drag begun right after it.
  const [canvasDrawn, setCanvasDrawn] = useState(false);
  const [panelMounted, setPanelMounted] = useState(false);
  const onDrawn = useCallback(() => {
    // A User Timing mark (DevTools' timings track; the builder benchmark splits scripts at it).
    performance.mark("ballast:canvas-drawn");
    setCanvasDrawn(true);
  }, []);
  useEffect(() => {
    // A canvas that never reports (a node React Flow cannot measure) must not hide the panel.
    const t = window.setTimeout(() => setCanvasDrawn(true), 2000);
    return () => window.clearTimeout(t);
  }, []);
  if (canvasDrawn && !pointerDown && !panelMounted) setPanelMounted(true);
  const save = useAutosave(graph.id, builder.spec, graph, !readOnly);
  const [dialog, setDialog] = useState<"help" | "publish" | "run" | null>(null);
  const [toast, setToast] = useState<string | null>(null);
  const [latestVersion, setLatestVersion] = useState(graph.latest_version);
  const runVersion = version ?? latestVersion;
  // The latest version's content hash: Publish is disabled while the draft equals it.
  const [latestHash, setLatestHash] = useState<string | undefined>(undefined);
  useEffect(() => {
    setLatestHash(undefined);
    if (!latestVersion || readOnly) return;
    let live = true;
    api<{ content_hash?: string }>(`graphs/${graph.id}/versions/${latestVersion}/`)
      .then((v) => { if (live) setLatestHash(v.content_hash); })
      .catch(() => { /* unknown: Publish stays enabled, the server answers with the same version */ });
    return () => { live = false; };
  }, [graph.id, latestVersion, readOnly]);
  const [historyOpen, setHistoryOpen] = useState(historyParam);
  // The Triggers panel takes the side panel's place, as the history does (one at a time).
  const [triggersOpen, setTriggersOpen] = useState(false);
  const canBuild = ctx.user?.can.build ?? false;
  // Bumped to remount the history list: after a publish (new row) and when a comparison is
  // cleared from the canvas's legend (the list's own picks and diff clear with it).
  const [historyKey, setHistoryKey] = useState(0);
  const [comparison, setComparison] = useState<Comparison | null>(null);
  const [compareError, setCompareError] = useState<string | null>(null);
  // The compared graph has its own read-only builder state, so the draft (and its undo
  // history and autosave) is untouched while a comparison is on the canvas.
  const compared = useBuilderState(EMPTY_SPEC, { readOnly: true, catalogue, validation: null });
  const compareRequest = useRef(0);
  const { reset: resetCompared } = compared;
  const showDiff = useCallback((diff: VersionDiff | null) => {
    const request = ++compareRequest.current;
    setCompareError(null);
    if (diff === null) { setComparison(null); return; }
    Promise.all([
      api<{ spec: GraphSpec }>(`graphs/${graph.id}/versions/${diff.from}/`),
      api<{ spec: GraphSpec }>(`graphs/${graph.id}/versions/${diff.to}/`),
    ]).then(([older, newer]) => {
      if (request !== compareRequest.current) return;
      const view = comparisonView(older.spec, newer.spec, diff);
      resetCompared(view.spec);
      setComparison({ diff, marks: view.marks });
    }).catch((err: unknown) => {
      if (request === compareRequest.current) setCompareError(err instanceof Error ? err.message : String(err));
    });
  }, [graph.id, resetCompared]);
  const clearComparison = useCallback(() => {
    compareRequest.current++;
    setComparison(null);
    setCompareError(null);
    setHistoryKey((k) => k + 1);
  }, []);
  useEffect(() => {
    if (!toast) return;
    // Long enough to read a publish confirmation with its message.
    const t = window.setTimeout(() => setToast(null), 6000);
    return () => window.clearTimeout(t);
  }, [toast]);
  const onHelp = useCallback(() => setDialog((d) => (d === "help" ? null : "help")), []);

  const { flush } = save;
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "s") { e.preventDefault(); void flush(); }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [flush]);

  // The same elements on every render: the page renders again for its save status, the
  // validation's progress or a toast, and these children then skip (they follow their own
  // props and the builder context). A save or validation landing during a drag used to render
  // the side panel's form and the palette in the middle of the canvas's frames.
  const sidePanel = useMemo(() => <SidePanel />, []);
  const builderRef = useRef(builder);
  builderRef.current = builder;
  const addKind = useCallback((kind: string) => addAtCentre(builderRef.current, kind), []);
  const palette = useMemo(() => <Palette catalogue={catalogue} onAdd={addKind} />, [catalogue, addKind]);

  const errors = builder.validation?.errors ?? [];
  // The draft as validated: Publish compares its hash with the latest version's (latestHash);
  // the run dialog with the hash of the version it runs. The Run button's title counts only an
  // invalid draft as differing.
  const draftState: DraftState | null = builder.validation === null ? null
    : { problems: errors.length, contentHash: builder.validation.content_hash ?? null };
  const draftDiffers = errors.length > 0;
  const publishBlocked = publishBlockedReason(draftState, latestVersion ? { number: latestVersion, hash: latestHash } : null);
  const notice = draftNotice({ latestVersion, onDraft: version === null, canBuild: !readOnly, canOperate: ctx.user?.can.operate ?? false, problems: errors.length });

  return (
    <BuilderContext.Provider value={builder}>
      <ReactFlowProvider>
        <div className="builder">
          <header className="builder__bar">
            <a href={ctx.urls.home ?? "/"} className="builder__back" title="All graphs">← Graphs</a>
            <h1 className="builder__name">{builder.spec.name}</h1>
            {version !== null && (
              <span className="badge badge--info">Version {version} · read-only · <a href={window.location.pathname}>back to the draft</a></span>
            )}
            {version === null && readOnly && <span className="badge badge--info">Read-only: you may not edit graphs</span>}
            {!readOnly && (
              <span className={`save-status save-status--${save.status}`} role="status" data-status={save.status}
                title={save.error ?? (save.lastSavedAt ? `Last saved ${save.lastSavedAt.toLocaleTimeString()}` : "")}>
                {STATUS_TEXT[save.status]}
              </span>
            )}
            <span className="builder__spacer" />
            <span className="muted builder__meta">
              {latestVersion ? `Latest version ${latestVersion}` : "Never published"}
            </span>
            <button type="button" aria-pressed={historyOpen} title="Published versions: open, compare, restore"
              onClick={() => { if (historyOpen) clearComparison(); setHistoryOpen(!historyOpen); setTriggersOpen(false); }}>History</button>
            {canBuild && (
              <button type="button" aria-pressed={triggersOpen && !historyOpen} title="Webhooks that start runs of this graph: URLs, secrets, deliveries, test events"
                onClick={() => { if (historyOpen) { clearComparison(); setHistoryOpen(false); } setTriggersOpen(!triggersOpen || historyOpen); }}>Triggers</button>
            )}
            <a className="button" href={`/api/v1/graphs/${graph.id}/export/`} download={`${graph.name}.json`}>Export</a>
            {!readOnly && (
              <button type="button" className="button button--primary" disabled={publishBlocked !== null}
                title={publishBlocked ?? "Publish the draft as a new version"} onClick={() => setDialog("publish")}>Publish</button>
            )}
            {(ctx.user?.can.operate ?? false) && (
              // On a published version's page, Run starts that version; on the draft, the latest one.
              <button type="button" className="button" disabled={!runVersion}
                title={runBlocked(runVersion) ?? (version === null && draftDiffers ? `Runs version ${runVersion}, not your draft (unpublished changes)` : `Start a run of version ${runVersion}`)}
                onClick={() => setDialog("run")}>{version !== null ? `Run version ${version}` : "Run"}</button>
            )}
          </header>
          {notice && <div className="builder__why" role="note">{notice}</div>}
          <div className={`builder__body${readOnly || comparison ? " builder__body--readonly" : ""}`}>
            {!readOnly && !comparison && palette}
            <div className="builder__main" onPointerDownCapture={() => setPointerDown(true)}>
              {compareError && <p role="alert" className="alert diff-legend">Could not draw the comparison: {compareError}</p>}
              {comparison ? (
                <>
                  <DiffLegend comparison={comparison} onClear={clearComparison} />
                  <BuilderContext.Provider value={compared}>
                    <ReactFlowProvider>
                      <Canvas key={`${comparison.diff.from}:${comparison.diff.to}`} onHelp={onHelp} onMessage={setToast} diff={comparison.marks} />
                    </ReactFlowProvider>
                  </BuilderContext.Provider>
                </>
              ) : (
                <>
                  <Canvas onHelp={onHelp} onMessage={setToast} onDrawn={onDrawn} />
                  <ErrorsPanel pending={validation.pending} failed={validation.failed} />
                </>
              )}
            </div>
            {historyOpen ? (
              // The diff list selects nodes on whichever canvas is drawn.
              <BuilderContext.Provider value={comparison ? compared : builder}>
                <Suspense fallback={<aside className="versions-panel muted" aria-busy="true">Loading…</aside>}>
                  <VersionsPanel key={historyKey} graphId={graph.id} openVersion={version} onShowDiff={showDiff}
                    baseRevision={readOnly ? undefined : save.revision}
                    onOpenVersion={(n) => {
                      const url = `${window.location.pathname}?${n === null ? "" : `version=${n}&`}history=1`;
                      void save.flush().then(() => window.location.assign(url));
                    }}
                    onRestored={(draft) => {
                      // From a read-only version the page goes back to the draft; on the draft the
                      // restored copy replaces the canvas and becomes autosave's base.
                      if (version !== null) { window.location.assign(`${window.location.pathname}?history=1`); return; }
                      builder.reset(draft.spec);
                      save.adopt({ spec: draft.spec, revision: draft.revision,
                        updated_by: (draft.updated_by as string | undefined) ?? null, updated_at: (draft.updated_at as string | undefined) ?? null });
                      clearComparison();
                      setToast("Restored: the draft now holds that version.");
                    }} />
                </Suspense>
              </BuilderContext.Provider>
            ) : triggersOpen ? (
              <Suspense fallback={<aside className="versions-panel muted" aria-busy="true">Loading…</aside>}>
                <TriggersPanel graphId={graph.id} latestVersion={latestVersion} inputSchema={builder.spec.input_schema}
                  testInput={builder.spec.test_input ?? null}
                  onPin={readOnly ? undefined : (payload) => {
                    builder.change((s) => {
                      const next = { ...s };
                      if (payload === null) delete next.test_input;
                      else next.test_input = payload;
                      return next;
                    });
                    setToast(payload === null ? "Unpinned the test input." : "Pinned the delivery's input as the draft's test input.");
                  }} />
              </Suspense>
            ) : (
              <BuilderContext.Provider value={panelState.current}>
                <Suspense fallback={PANEL_LOADING}>
                  {panelMounted ? sidePanel : PANEL_LOADING}
                </Suspense>
              </BuilderContext.Provider>
            )}
          </div>
          {toast && <div className="toast" role="status">{toast}</div>}
          {dialog === "help" && <HelpDialog onClose={() => setDialog(null)} />}
          {dialog === "publish" && (
            <PublishDialog graphId={graph.id} flush={save.flush} onClose={() => setDialog(null)}
              onVersion={(n) => { setLatestVersion(n); setHistoryKey((k) => k + 1); }}
              onShowTriggers={() => { setDialog(null); if (historyOpen) { clearComparison(); setHistoryOpen(false); } setTriggersOpen(true); }}
              onPublished={(n, message) => {
                setDialog(null);
                setToast(message.trim() ? `Published version ${n}: ${message.trim()}` : `Published version ${n}.`);
              }} />
          )}
          {dialog === "run" && runVersion && (
            <RunStarter graphId={graph.id} version={runVersion} onClose={() => setDialog(null)}
              draft={version !== null ? null : draftState} testInput={version !== null ? null : builder.spec.test_input ?? null} />
          )}
          {save.status === "conflict" && save.conflict && (
            <ConflictDialog mine={builder.spec} theirs={save.conflict} graphName={graph.name}
              onReload={() => { const c = save.conflict as StoredDraft; builder.reset(c.spec); save.adopt(c); }}
              onCopy={async () => {
                const copy = await api<{ id: number; revision?: number }>(`graphs/${graph.id}/duplicate/`, {
                  method: "POST", body: { name: `${graph.name} (my copy ${new Date().toISOString().slice(0, 16).replace("T", " ")})` } });
                const fresh = await api<GraphDetail>(`graphs/${copy.id}/`);
                await api(`graphs/${copy.id}/`, { method: "PATCH", body: { spec: { ...builder.spec, name: fresh.spec.name }, base_revision: fresh.revision } });
                save.detach();
                window.location.assign(`/graphs/${copy.id}/`);
              }} />
          )}
        </div>
      </ReactFlowProvider>
    </BuilderContext.Provider>
  );
}

function addAtCentre(builder: ReturnType<typeof useBuilderState>, kind: string) {
  const taken = new Set(builder.spec.nodes.map((n) => n.id));
  let id = kind.replace(/[^A-Za-z0-9_-]/g, "_");
  for (let i = 2; taken.has(id); i++) id = `${kind}_${i}`;
  const count = builder.spec.nodes.length;
  builder.change((s) => ({ ...s, nodes: [...s.nodes, { id, kind, config: {}, position: { x: 80 + (count % 5) * 40, y: 80 + (count % 5) * 40 } }] }));
  builder.select({ nodes: [id], edges: [], notes: [], field: null });
}

/** Above a compared graph: which versions, what the colours mean (with counts), and the way back. */
function DiffLegend({ comparison, onClear }: { comparison: Comparison; onClear: () => void }) {
  const counts = { added: { nodes: 0, edges: 0 }, changed: { nodes: 0, edges: 0 }, removed: { nodes: 0, edges: 0 } };
  for (const change of Object.values(comparison.marks.nodes)) counts[change].nodes++;
  for (const change of Object.values(comparison.marks.edges)) counts[change].edges++;
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;
  const parts = ({ nodes, edges }: { nodes: number; edges: number }) =>
    [nodes ? plural(nodes, "node") : "", edges ? plural(edges, "edge") : ""].filter(Boolean).join(", ") || "none";
  const { from, to } = comparison.diff;
  return (
    <div className="diff-legend" role="region" aria-label="Comparison legend">
      <span className="diff-legend__title">Comparing version {from} → {to}</span>
      {(["added", "changed", "removed"] as const).map((change) => (
        <span key={change} className="diff-legend__key">
          <span className={`diff-legend__swatch diff-legend__swatch--${change}`} aria-hidden="true" />
          {change}: {parts(counts[change])}
        </span>
      ))}
      <span className="muted diff-legend__note" title="The draft is not changed by comparing">Showing version {to}, read-only</span>
      <span className="builder__spacer" />
      <button type="button" className="button" onClick={onClear}>Close comparison</button>
    </div>
  );
}

function HelpDialog({ onClose }: { onClose: () => void }) {
  return (
    <Dialog title="Keyboard shortcuts" onClose={onClose}>
      <table className="shortcuts">
        <tbody>
          {[...SHORTCUTS, { keys: ["Ctrl+S"], what: "save the draft now (it also saves by itself)" }].map((s) => (
            <tr key={s.what}>
              <th scope="row">
                {s.gesture ?? s.keys?.map((k, i) => <Fragment key={k}>{i > 0 ? <span className="muted"> {s.sep ?? "or"} </span> : null}<kbd>{k}</kbd></Fragment>)}
              </th>
              <td>{s.what}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Dialog>
  );
}

function PublishDialog({ graphId, flush, onClose, onPublished, onVersion, onShowTriggers }: {
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
      .then((saved) => (saved ? api<{ warnings: PublishWarning[] }>(`graphs/${graphId}/publish-check/`) : { warnings: [] }))
      .then((check) => { if (live) { setAhead(check.warnings); setChecked(true); } })
      .catch(() => { if (live) setChecked(true); /* the publish answer carries the same warnings */ });
    return () => { live = false; };
  }, [flush, graphId]);
  const publish = async () => {
    setBusy(true);
    setError(null);
    try {
      if (!(await flush())) throw new Error("the draft could not be saved first");
      const v = await api<{ number: number; warnings?: PublishWarning[] }>(`graphs/${graphId}/versions/`, { method: "POST", body: { message } });
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
          <button type="button" className="button" onClick={onClose}>Close</button>
          <button type="button" className="button button--primary" onClick={onShowTriggers}>Open Triggers</button>
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
          <button type="button" className="button" onClick={onClose}>Cancel</button>
          <button type="submit" className="button button--primary" disabled={busy}>{busy ? "Publishing…" : "Publish"}</button>
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

/**
 * Start a run of published ``version``: its own spec is fetched (the draft's input schema may
 * already differ), then the panel's StartRunDialog shows the input form, POSTs the run and
 * opens its page.
 */
function RunStarter({ graphId, version, onClose, draft, testInput }: {
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
    api<{ spec: GraphSpec; content_hash?: string }>(`graphs/${graphId}/versions/${version}/`)
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

function ConflictDialog({ mine, theirs, graphName, onReload, onCopy }: {
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
        <button type="button" className="button" onClick={onReload}>Load the stored version (drop mine)</button>
        <button type="button" className="button button--primary" disabled={busy}
          onClick={() => { setBusy(true); onCopy().catch((err: unknown) => { setBusy(false); setError(String(err)); }); }}>
          Keep mine as a copy
        </button>
      </div>
    </Dialog>
  );
}
