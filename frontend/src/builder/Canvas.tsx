// The builder canvas: React Flow over the spec (nodes, edges, notes), with drag and drop, shortcuts and layout.
import {
  Background, ControlButton, Controls, Panel, ReactFlow, applyNodeChanges, useNodesInitialized, useReactFlow, useStoreApi,
  type Connection, type Edge, type EdgeChange, type IsValidConnection, type NodeChange, type NodePositionChange,
} from "@xyflow/react";
import { memo, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type DragEvent, type MouseEvent, type ReactNode } from "react";
import { NOTE_PREFIX, applyPositions, type NodeRunMark, connectionToEdge, hasEdge, removeElements, specToFlowEdges, specToFlowNodes, withLivePositions, withSelection, type BallastFlowNode, type FlowNode } from "./flow";
import { layoutPositions } from "./layout";
import { SpecMiniMap } from "./SpecMiniMap";
import { addPaletteEntry } from "./graphToolEntry";
import { DRAG_MIME } from "./Palette";
import { freshId, type EdgeSpec, type Position } from "./spec";
import { edgeKey, useBuilder } from "./store";
import { CANVAS_INSETS, FIT_RUN, FIT_VIEW, fitViewport } from "./viewport";
import { AddAfterContext } from "./addAfter";
import { clearOf } from "./picker";
import { useCanvasKeys } from "./useCanvasKeys";
import { CARD, overlayBoxes, useNodePicker } from "./useNodePicker";
import { sameSet, mergeNodes } from "./nodeMerge";
import { useCanvasClipboard } from "./useCanvasClipboard";
import { nodeTypes, edgeTypes, minimapNodeColour, DEFAULT_EDGE_OPTIONS, PRO_OPTIONS, DELETE_KEYS, MULTI_SELECT_KEYS, FitViewIcon, preloadPanelOnHover } from "./canvasProps";
import { Button } from "../shell/Button";

/** A version comparison drawn on the canvas: how each node and edge (by edgeKey) changed. */
export interface CanvasDiff {
  nodes: Readonly<Record<string, "added" | "removed" | "changed">>;
  edges: Readonly<Record<string, "added" | "removed">>;
}

/**
 * Memoised: the page re-renders for things the canvas does not draw (a pointer going down,
 * the save status, a toast); the canvas follows only the builder state and its own props.
 */
export const Canvas = memo(function Canvas({ onHelp, onMessage, diff, onDrawn, runMarks, onNodeOpen, overlay }: {
  /** Opens the keyboard-shortcut help; without it the canvas shows no "?" button and ignores the key. */
  onHelp?: () => void; onMessage: (text: string) => void; diff?: CanvasDiff;
  /** Called once, when every node has been drawn and measured (at once for an empty graph). */
  onDrawn?: () => void;
  /** A run's page: each node's state in the run, drawn on its card (read-only builders only). */
  runMarks?: Readonly<Record<string, NodeRunMark>>;
  /** Called with a graph node's id when it is clicked (a run's page opens its step inspector). */
  onNodeOpen?: (nodeId: string) => void;
  /** Drawn over the canvas at its bottom centre (the builder's problems count); keep it one element for the canvas's life. */
  overlay?: ReactNode;
}) {
  const b = useBuilder();
  // A run's page (read-only, marked): its canvas resizes as the inspector opens and closes (the
  // graph is fitted again then) and the wheel scrolls the page. The builder marking a draft
  // run's result keeps its own wheel and view.
  const runView = !!runMarks && b.readOnly;
  const refitOnResize = runView;
  const rf = useReactFlow<FlowNode, Edge>();
  const flowStore = useStoreApi<FlowNode, Edge>();
  const initialised = useNodesInitialized();
  const { spec, readOnly, catalogue, validation, selection } = b;
  const bRef = useRef(b);
  bRef.current = b;
  const selRef = useRef(selection);
  selRef.current = selection;

  const selectedNodes = useMemo(() => new Set(selection.nodes), [selection.nodes]);
  const selectedNotes = useMemo(() => new Set(selection.notes), [selection.notes]);
  const selectedEdges = useMemo(() => new Set(selection.edges), [selection.edges]);
  // Two steps so a selection change (every drag starts with one) does not rebuild 300 nodes'
  // data and compare it: the document's nodes change with the spec, validation or comparison;
  // the selection only flips ``selected`` on the nodes it touches.
  const drawn = useMemo(
    () => specToFlowNodes(spec, { catalogue, validation, readOnly, diffStatus: diff?.nodes, runMarks }),
    [spec, catalogue, validation, readOnly, diff, runMarks],
  );
  const derived = useMemo(() => withSelection(drawn, selectedNodes, selectedNotes), [drawn, selectedNodes, selectedNotes]);
  const [nodes, setNodes] = useState<FlowNode[]>(derived);
  // Where React Flow holds the nodes a drag is moving (id -> flow position), while it lasts.
  // Mid-drag moves go to React Flow's store alone (onNodesChange): a frame then costs React
  // Flow's update of the moved node and its edges, not this component's render, a new
  // ``nodes`` prop and React Flow adopting 300 nodes again. This state catches up with the
  // drag's last change (``dragging: false``); any node array it hands React Flow before then
  // carries these positions (withLivePositions).
  const live = useRef(new Map<string, Position>());
  // Between React Flow's drag start and stop (its drop arrives as ``dragging: false`` changes
  // just before onNodeDragStop, which writes the spec).
  const dragActive = useRef(false);
  const drawnReported = useRef(false);
  useEffect(() => {
    if (drawnReported.current || !(initialised || spec.nodes.length === 0)) return;
    drawnReported.current = true;
    onDrawn?.();
  }, [initialised, spec.nodes.length, onDrawn]);
  // Fit the graph in view when it opens with nodes; an empty canvas keeps zoom 1 (React Flow
  // would otherwise zoom onto the first dropped node, moving the canvas under the user's hand).
  const [fitOnOpen] = useState(() => derived.length > 0);
  // One fit for the first view, the Fit button, F, the controls' button and auto-layout.
  const fit = useCallback((duration = 200) => {
    const all = rf.getNodes();
    if (all.length === 0) return;
    const { width, height } = flowStore.getState();
    const start = all.find((n) => n.type === "ballast" && n.data.node.kind === "start");
    const view = fitViewport(rf.getNodesBounds(all), start ? rf.getNodesBounds([start]) : null, width, height, refitOnResize ? FIT_RUN : FIT_VIEW, CANVAS_INSETS);
    if (view) void rf.setViewport(view, { duration });
  }, [rf, flowStore, refitOnResize]);
  useEffect(() => {
    if (!refitOnResize) return;
    let { width, height } = flowStore.getState();
    return flowStore.subscribe((s) => {
      if (s.width === width && s.height === height) return;
      ({ width, height } = s);
      if (width > 0 && height > 0) fit(0);
    });
  }, [refitOnResize, flowStore, fit]);
  const fitted = useRef(!fitOnOpen);
  // Before the measured nodes are painted, so the graph does not first show at zoom 1.
  useLayoutEffect(() => {
    if (fitted.current || !initialised) return;
    fitted.current = true;
    fit(0);
  }, [initialised, fit]);
  useEffect(() => setNodes((prev) => withLivePositions(mergeNodes(prev, derived), live.current)), [derived]);
  const fitAfterLayout = useRef(false);
  useEffect(() => {
    // React Flow adopts ``nodes`` in its own (child) effect, which has run by now.
    if (!fitAfterLayout.current) return;
    fitAfterLayout.current = false;
    fit();
  }, [nodes, fit]);
  // Reuse unchanged edge objects: React Flow re-renders an edge only when its object changes.
  const edgeCache = useRef(new Map<string, Edge>());
  const edges = useMemo(() => {
    const next = specToFlowEdges(spec, { selectedEdges, readOnly }).map((e, i) => {
      const change = diff?.edges[edgeKey(spec.edges[i] as EdgeSpec)];
      return change ? { ...e, className: `bedge--diff-${change}` } : e;
    });
    const cache = edgeCache.current;
    const out = next.map((e) => {
      const p = cache.get(e.id);
      return p && p.source === e.source && p.target === e.target && p.sourceHandle === e.sourceHandle
        && p.targetHandle === e.targetHandle && p.className === e.className && !!p.selected === !!e.selected && p.deletable === e.deletable
        && (p.data as { index: number }).index === (e.data as { index: number }).index ? p : e;
    });
    edgeCache.current = new Map(out.map((e) => [e.id, e]));
    return out;
  }, [spec, selectedEdges, readOnly, diff]);

  const onNodesChange = useCallback((changes: NodeChange<FlowNode>[]) => {
    const moving = changes.filter((c): c is NodePositionChange => c.type === "position" && !!c.dragging && !!c.position);
    if (moving.length) {
      for (const c of moving) live.current.set(c.id, c.position as Position);
      const flow = flowStore.getState();
      flow.setNodes(applyNodeChanges(moving, flow.nodes));
    }
    // The drag's last change (``dragging: false``) carries every dragged node's final position.
    const local = changes.filter((c) => (c.type === "position" && !c.dragging) || c.type === "dimensions");
    if (local.length) {
      for (const c of local) if (c.type === "position") live.current.delete(c.id);
      setNodes((nds) => withLivePositions(applyNodeChanges(local, nds), live.current));
    }
    // Outside a drag, a position change is React Flow moving the selection by the arrow
    // keys: each press is one undo step, saved like a drop (else it snapped back unsaved).
    const keyed = dragActive.current ? [] : changes.filter((c): c is NodePositionChange => c.type === "position" && !c.dragging && !!c.position);
    if (keyed.length && !bRef.current.readOnly) {
      const positions = new Map(keyed.map((c) => [c.id, c.position as Position]));
      bRef.current.change((s) => applyPositions(s, positions));
    }
    const sel = changes.filter((c) => c.type === "select");
    if (sel.length) {
      const nodeSel = new Set(selRef.current.nodes);
      const noteSel = new Set(selRef.current.notes);
      for (const c of sel) {
        if (c.type !== "select") continue;
        const isNote = c.id.startsWith(NOTE_PREFIX);
        const set = isNote ? noteSel : nodeSel;
        const id = isNote ? c.id.slice(NOTE_PREFIX.length) : c.id;
        if (c.selected) set.add(id); else set.delete(id);
      }
      const next = { ...selRef.current, nodes: [...nodeSel], notes: [...noteSel] };
      if (!sameSet(next.nodes, selRef.current.nodes) || !sameSet(next.notes, selRef.current.notes)) {
        selRef.current = { ...next, field: null };
        bRef.current.select({ nodes: next.nodes, notes: next.notes, field: null });
      }
    }
  }, [flowStore]);

  const onEdgesChange = useCallback((changes: EdgeChange<Edge>[]) => {
    const sel = changes.filter((c) => c.type === "select");
    if (!sel.length) return;
    const edgeSel = new Set(selRef.current.edges);
    for (const c of sel) if (c.type === "select") { if (c.selected) edgeSel.add(c.id); else edgeSel.delete(c.id); }
    const list = [...edgeSel];
    if (!sameSet(list, selRef.current.edges)) {
      selRef.current = { ...selRef.current, edges: list };
      bRef.current.select({ edges: list });
    }
  }, []);

  const onDelete = useCallback(({ nodes: ns, edges: es }: { nodes: FlowNode[]; edges: Edge[] }) => {
    const nodeIds = new Set(ns.filter((n) => n.type === "ballast").map((n) => n.id));
    const noteIds = new Set(ns.filter((n) => n.type === "note").map((n) => n.id.slice(NOTE_PREFIX.length)));
    const edgeIds = new Set(es.map((e) => e.id));
    bRef.current.change((s) => removeElements(s, nodeIds, edgeIds, noteIds));
    bRef.current.select({ nodes: [], edges: [], notes: [], field: null });
  }, []);

  const onConnect = useCallback((c: Connection) => {
    const edge = connectionToEdge(c);
    bRef.current.change((s) => (hasEdge(s, edge) ? s : { ...s, edges: [...s.edges, edge] }));
  }, []);

  const onNodeOpenRef = useRef(onNodeOpen);
  onNodeOpenRef.current = onNodeOpen;
  const onNodeClick = useCallback((_: MouseEvent, n: FlowNode) => {
    if (n.type === "ballast") onNodeOpenRef.current?.(n.id);
  }, []);

  const isValidConnection: IsValidConnection = useCallback((c) => c.source !== c.target, []);

  const onNodeDragStart = useCallback(() => { dragActive.current = true; }, []);
  const onNodeDragStop = useCallback((_: unknown, __: unknown, dragged: FlowNode[]) => {
    dragActive.current = false;
    // One undo step for the whole drag, written once at the end (not on every mouse move).
    const positions = new Map(dragged.map((n) => [n.id, n.position]));
    bRef.current.change((s) => applyPositions(s, positions));
  }, []);

  const canvasRef = useRef<HTMLDivElement>(null);
  const onDrop = useCallback((e: DragEvent) => {
    e.preventDefault();
    if (bRef.current.readOnly) return;
    const kind = e.dataTransfer.getData(DRAG_MIME);
    if (!kind || !canvasRef.current) return;
    // Dropped over an overlay (toolbar, minimap, controls, problems), the card moves the least
    // distance that leaves it clear: a node under an overlay could be neither seen nor grabbed.
    const { zoom } = rf.getViewport();
    const { overlays, area } = overlayBoxes(canvasRef.current);
    const w = CARD.width * zoom, h = CARD.height * zoom;
    const to = clearOf({ x: e.clientX - 0.45 * w, y: e.clientY - 0.4 * h, width: w, height: h }, overlays, area);
    // A graph tool dropped on an agent's card joins that agent; anywhere else, a new agent holds it.
    const card = document.elementsFromPoint(e.clientX, e.clientY).map((el) => el.closest(".react-flow__node")).find(Boolean);
    const added = addPaletteEntry(bRef.current.spec, kind, card?.getAttribute("data-id"), rf.screenToFlowPosition({ x: to.x, y: to.y }));
    bRef.current.change(() => added.spec);
    bRef.current.select({ nodes: [added.node], edges: [], notes: [], field: added.field });
  }, [rf]);

  const onDragOver = useCallback((e: DragEvent) => {
    e.preventDefault();
    e.dataTransfer.dropEffect = "move";
  }, []);

  const addNote = useCallback(() => {
    const s = bRef.current.spec;
    const id = freshId("note", new Set((s.notes ?? []).map((n) => n.id)));
    const c = rf.screenToFlowPosition({ x: window.innerWidth / 2, y: window.innerHeight / 3 });
    bRef.current.change((g) => ({ ...g, notes: [...(g.notes ?? []), { id, text: "", position: { x: Math.round(c.x), y: Math.round(c.y) }, width: 220, height: 140 }] }));
    bRef.current.select({ nodes: [], edges: [], notes: [id], field: null });
  }, [rf]);

  const layout = useCallback(() => {
    const current = rf.getNodes() as FlowNode[];
    const sizes = new Map<string, { width: number; height: number }>();
    for (const n of current) {
      if (n.type !== "ballast") continue;
      if (!n.measured?.width || !n.measured?.height) { onMessage("Auto-layout waits until every node is drawn."); return; }
      sizes.set(n.id, { width: n.measured.width, height: n.measured.height });
    }
    const order = new Map(current.filter((n): n is BallastFlowNode => n.type === "ballast").map((n) => [n.id, n.data.handles.outputs]));
    let positions;
    try {
      positions = layoutPositions(bRef.current.spec, sizes, (id) => order.get(id) ?? []);
    } catch (err) {
      onMessage(`Auto-layout failed, positions kept: ${String(err)}`);
      return;
    }
    if (applyPositions(bRef.current.spec, positions) === bRef.current.spec) { fit(); return; } // already laid out
    // Fit once React Flow holds the new positions (the effect below), not on a frame that may
    // come before them: a fit of the old layout left the view off the graph.
    fitAfterLayout.current = true;
    bRef.current.change((s) => applyPositions(s, positions));
  }, [rf, onMessage, fit]);

  const { copy, paste } = useCanvasClipboard(bRef, selRef, onMessage);

  useCanvasKeys(bRef, selRef, { copy, paste, layout, addNote, onHelp, fit });

  const { addAfter, onConnectEnd, openAt, picker } = useNodePicker(bRef, canvasRef);
  // A graph just begun (a new graph's Start and End): every "+" shows, and a line says what it does.
  const starter = !readOnly && spec.nodes.length > 0 && spec.nodes.length <= 2;
  // The toolbar's "Add node": the picker at the canvas's centre, its node placed there (with the palette hidden too).
  const addFromToolbar = useCallback(() => {
    const r = canvasRef.current?.getBoundingClientRect();
    if (r) openAt(r.left + r.width / 2, r.top + r.height / 2);
  }, [openAt]);

  return (
    <AddAfterContext.Provider value={readOnly ? null : addAfter}>
    <div className={`canvas${starter ? " canvas--starter" : ""}`} ref={canvasRef} onDrop={onDrop} onDragOver={onDragOver} data-testid="canvas">
      <ReactFlow<FlowNode, Edge>
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        edgeTypes={edgeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={readOnly ? undefined : onConnect}
        onConnectEnd={readOnly ? undefined : onConnectEnd}
        onDelete={readOnly ? undefined : onDelete}
        onNodeDragStart={onNodeDragStart}
        onNodeDragStop={onNodeDragStop}
        onNodeMouseEnter={onNodeOpen ? undefined : preloadPanelOnHover}
        onNodeClick={onNodeOpen ? onNodeClick : undefined}
        isValidConnection={isValidConnection}
        nodesDraggable={!readOnly}
        nodesConnectable={!readOnly}
        edgesReconnectable={false}
        deleteKeyCode={readOnly ? null : DELETE_KEYS}
        multiSelectionKeyCode={MULTI_SELECT_KEYS}
        selectionKeyCode="Shift"
        selectionOnDrag={false}
        defaultEdgeOptions={DEFAULT_EDGE_OPTIONS}
        minZoom={0.1}
        maxZoom={2}
        // On the run page the graph sits in a page that scrolls: the wheel scrolls the page,
        // Ctrl+wheel (a trackpad pinch) and the +/− controls zoom. The builder's canvas fills
        // its screen, so there the wheel zooms.
        zoomOnScroll={!runView}
        preventScrolling={!runView}
        proOptions={PRO_OPTIONS}
      >
        <Background gap={20} size={1} />
        <Controls showInteractive={false} showFitView={false}>
          <ControlButton onClick={() => fit()} className="react-flow__controls-fitview" title="Fit view" aria-label="Fit view">
            <FitViewIcon />
          </ControlButton>
        </Controls>
        <SpecMiniMap nodes={nodes} nodeColour={minimapNodeColour} />
        <Panel position="top-left" className="canvas-toolbar">
          {!readOnly && <Button size="small" onClick={() => b.undo()} disabled={!b.canUndo} title="Undo (Ctrl+Z)">Undo</Button>}
          {!readOnly && <Button size="small" onClick={() => b.redo()} disabled={!b.canRedo} title="Redo (Ctrl+Shift+Z)">Redo</Button>}
          <Button size="small" onClick={() => fit()} title="Fit view (F)">Fit</Button>
          {!readOnly && <Button size="small" onClick={layout} disabled={!initialised && spec.nodes.length > 0} title="Auto-layout (Shift+L)">Auto-layout</Button>}
          {!readOnly && <Button size="small" onClick={addFromToolbar} title="Add a node (opens the node picker)">+ Node</Button>}
          {!readOnly && <Button size="small" onClick={addNote} title="Add a sticky note (N)">Note</Button>}
          {onHelp && <Button size="small" onClick={onHelp} title="Keyboard shortcuts (?)" aria-label="Keyboard shortcuts">?</Button>}
        </Panel>
        {spec.nodes.length === 0 && !readOnly && (
          <Panel position="top-center" className="canvas-empty">Drag a node kind from the palette to start, beginning with Start.</Panel>
        )}
        {starter && <Panel position="top-center" className="canvas-empty">Click “+” beside an output to add the next node.</Panel>}
        {overlay && <Panel position="bottom-center" className="canvas-overlay">{overlay}</Panel>}
      </ReactFlow>
      {picker}
    </div>
    </AddAfterContext.Provider>
  );
});
