// The builder page (/graphs/<id>/): loads the graph, the node-kind catalogue and validation; canvas, palette, side panel.
import type { GraphDetail, NodeKindInfo, RunDetail, StoredDraft, VersionDetail, VersionDiff } from "../api/types";
import { ReactFlowProvider } from "@xyflow/react";
import { seedPins } from "./run/pins";
import { Suspense, lazy, useCallback, useDeferredValue, useEffect, useMemo, useRef, useState } from "react";
import { api } from "../lib/api";
import { usePageContext } from "../lib/context";
import { Canvas } from "./Canvas";
import { DiffLegend, type Comparison } from "./DiffLegend";
import { comparisonView } from "./compare";
import { ErrorsPanel, ValidationStatusContext } from "./ErrorsPanel";
import { DockHide, DockRail, RAIL_WIDTH, useDocked } from "./useDocked";
import { addPaletteEntry, withGraphToolEntry } from "./graphToolEntry";
import { Palette } from "./Palette";
import { draftNotice, publishBlocked as publishBlockedReason, runBlocked, type DraftState } from "./run/runNote";
import { takeBuilderLoad, versionParam } from "./load";
import type { GraphSpec } from "./spec";
import { BuilderContext, useBuilderState } from "./store";
import { useAutosave, type SaveStatus } from "./useAutosave";
import { useValidation } from "./useValidation";
import { RunStarter } from "./run/RunStarter";
import { DraftRunResults } from "./run/DraftRunResults";
import { useDraftRun } from "./run/useDraftRun";
import { useDraftMarks } from "./run/useDraftMarks";
import { recordDraftRun } from "./run/lastData";
import { PublishDialog } from "./PublishDialog";
import { ConflictDialog } from "./ConflictDialog";
import { HelpDialog } from "./HelpDialog";
import "@xyflow/react/dist/style.css";
import "./builder.css";
import { Button, ButtonLink } from "../shell/Button";

// The side panel (JSON-Schema forms, code editors) is its own chunk: the canvas draws
// without waiting for those libraries to download and compile.
const SidePanel = lazy(() => import("./panel/SidePanel"));
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
        seedPins(graph.id, graph.pins);
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
    api<VersionDetail>(`graphs/${graph.id}/versions/${latestVersion}/`)
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
      api<VersionDetail>(`graphs/${graph.id}/versions/${diff.from}/`),
      api<VersionDetail>(`graphs/${graph.id}/versions/${diff.to}/`),
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
  const [paletteOpen, setPaletteOpen] = useDocked("palette");
  const [panelOpen, setPanelOpen] = useDocked("panel");
  const hidePalette = useCallback(() => setPaletteOpen(false), [setPaletteOpen]);
  const paletteEntries = useMemo(() => withGraphToolEntry(catalogue), [catalogue]);
  const palette = useMemo(() => <Palette catalogue={paletteEntries} onAdd={addKind} onHide={hidePalette} />, [paletteEntries, addKind, hidePalette]);
  // One element for the page's life: the canvas is memoised and re-renders only for its own props.
  const problems = useMemo(() => <ErrorsPanel />, []);
  const validationStatus = useMemo(() => ({ pending: validation.pending, failed: validation.failed }), [validation.pending, validation.failed]);
  const showPalette = !readOnly && !comparison;
  // The side panel's column: History and Triggers always show; the node panel and graph settings can be hidden.
  const panelHidden = !historyOpen && !triggersOpen && !panelOpen;
  const columns = [showPalette ? (paletteOpen ? "232px" : `${RAIL_WIDTH}px`) : null, "minmax(0, 1fr)", panelHidden ? `${RAIL_WIDTH}px` : "340px"];

  const errors = builder.validation?.errors ?? [];
  // The draft as validated: Publish compares its hash with the latest version's (latestHash);
  // the run dialog with the hash of the version it runs. The Run button's title counts only an
  // invalid draft as differing.
  const draftState: DraftState | null = builder.validation === null ? null
    : { problems: errors.length, contentHash: builder.validation.content_hash ?? null };
  const draftDiffers = errors.length > 0;
  const publishBlocked = publishBlockedReason(draftState, latestVersion ? { number: latestVersion, hash: latestHash } : null);
  const draft = useDraftRun({ graphId: graph.id, spec: builder.spec, flush: save.flush, problems: builder.validation === null ? null : errors.length, onMessage: setToast });
  // The draft run's node states on the canvas, while its drawer is open and the draft is the one that ran.
  const { marks: draftMarks, onRun: markRun } = useDraftMarks(builder.spec, draft.runId);
  const recordRun = useCallback((run: RunDetail) => { recordDraftRun(graph.id, run); markRun(run); }, [graph.id, markRun]);
  const selectNode = useCallback((id: string) => builderRef.current.select({ nodes: [id], edges: [], notes: [], field: null }), []);
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
              <span className={`save-status save-status--${save.status}`} role="status" data-status={save.status} data-revision={save.revision}
                title={save.error ?? (save.lastSavedAt ? `Last saved ${save.lastSavedAt.toLocaleTimeString()}` : "")}>
                {STATUS_TEXT[save.status]}
              </span>
            )}
            <span className="builder__spacer" />
            <span className="muted builder__meta">
              {latestVersion ? `Latest version ${latestVersion}` : "Never published"}
            </span>
            <Button aria-pressed={historyOpen} title="Published versions: open, compare, restore"
              onClick={() => { if (historyOpen) clearComparison(); setHistoryOpen(!historyOpen); setTriggersOpen(false); }}>History</Button>
            {canBuild && (
              <Button aria-pressed={triggersOpen && !historyOpen} title="Webhooks that start runs of this graph: URLs, secrets, deliveries, test events"
                onClick={() => { if (historyOpen) { clearComparison(); setHistoryOpen(false); } setTriggersOpen(!triggersOpen || historyOpen); }}>Triggers</Button>
            )}
            <ButtonLink href={`/api/v1/graphs/${graph.id}/export/`} download={`${graph.name}.json`}>Export</ButtonLink>
            {!readOnly && (
              <Button disabled={draft.blocked !== null || draft.starting}
                title={draft.blocked ?? "Run the draft as it is now, without publishing: a test run, kept out of run lists and reports"}
                onClick={() => void draft.start()}>{draft.starting ? "Starting…" : "Run draft"}</Button>
            )}
            {!readOnly && (
              <Button variant="primary" disabled={publishBlocked !== null}
                title={publishBlocked ?? "Publish the draft as a new version"} onClick={() => setDialog("publish")}>Publish</Button>
            )}
            {(ctx.user?.can.operate ?? false) && (
              // On a published version's page, Run starts that version; on the draft, the latest one.
              <Button disabled={!runVersion}
                title={runBlocked(runVersion) ?? (version === null && draftDiffers ? `Runs version ${runVersion}, not your draft (unpublished changes)` : `Start a run of version ${runVersion}`)}
                onClick={() => setDialog("run")}>{version !== null ? `Run version ${version}` : "Run"}</Button>
            )}
          </header>
          {notice && (
            <div className="builder__why" role="note">
              {notice}
              {!readOnly && version === null && !latestVersion && draft.blocked === null && (
                <> <Button variant="link" onClick={() => void draft.start()} disabled={draft.starting}>Run the draft now</Button></>
              )}
            </div>
          )}
          <div className={`builder__body${readOnly || comparison ? " builder__body--readonly" : ""}`}
            style={{ gridTemplateColumns: columns.filter(Boolean).join(" ") }}>
            {showPalette && (paletteOpen ? palette : <DockRail side="left" label="Node kinds" onOpen={() => setPaletteOpen(true)} />)}
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
                  <ValidationStatusContext.Provider value={validationStatus}>
                    <Canvas onHelp={onHelp} onMessage={setToast} onDrawn={onDrawn} overlay={problems} runMarks={draftMarks} />
                  </ValidationStatusContext.Provider>
                  {draft.runId !== null && <DraftRunResults key={draft.runId} runId={draft.runId} onClose={draft.close} onSelectNode={selectNode} onRun={recordRun} />}
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
                      save.adopt({ spec: draft.spec, revision: draft.revision, updated_by: draft.draft_updated_by, updated_at: draft.draft_updated_at });
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
            ) : panelHidden ? (
              <DockRail side="right" label="Side panel" onOpen={() => setPanelOpen(true)} />
            ) : (
              <div className="side-dock">
                <DockHide side="right" label="Side panel" onHide={() => setPanelOpen(false)} />
                <BuilderContext.Provider value={panelState.current}>
                  <Suspense fallback={PANEL_LOADING}>
                    {panelMounted ? sidePanel : PANEL_LOADING}
                  </Suspense>
                </BuilderContext.Provider>
              </div>
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
          {draft.dialog}
          {dialog === "run" && runVersion && (
            <RunStarter graphId={graph.id} version={runVersion} onClose={() => setDialog(null)}
              draft={version !== null ? null : draftState} testInput={version !== null ? null : builder.spec.test_input ?? null} />
          )}
          {save.status === "conflict" && save.conflict && (
            <ConflictDialog mine={builder.spec} theirs={save.conflict} graphName={graph.name}
              onReload={() => { const c = save.conflict as StoredDraft; builder.reset(c.spec); save.adopt(c); }}
              onCopy={async () => {
                const copy = await api<GraphDetail>(`graphs/${graph.id}/duplicate/`, {
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
  const count = builder.spec.nodes.length;
  // Added by keyboard: a graph tool goes to the one selected agent, else to a new agent.
  const selected = builder.selection.nodes.length === 1 ? builder.selection.nodes[0] : null;
  const added = addPaletteEntry(builder.spec, kind, selected, { x: 80 + (count % 5) * 40, y: 80 + (count % 5) * 40 });
  builder.change(() => added.spec);
  builder.select({ nodes: [added.node], edges: [], notes: [], field: added.field });
}
