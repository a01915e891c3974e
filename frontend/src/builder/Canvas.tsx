// The builder canvas: React Flow over the spec (nodes, edges, notes), with drag and drop, shortcuts and layout.
import type { ValidationIssue } from "../api/types";
import {
  Background, ControlButton, Controls, Panel, ReactFlow, applyNodeChanges, useNodesInitialized, useReactFlow,
  useStoreApi,
  type Connection, type Edge, type EdgeChange, type IsValidConnection, type NodeChange, type NodePositionChange,
} from "@xyflow/react";
import { memo, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type DragEvent, type MouseEvent } from "react";
import { CLIPBOARD_STORAGE_KEY, copyFragment, parseFragment, pasteFragment, pasteOffset, type Fragment } from "./clipboard";
import {
  NOTE_PREFIX, applyPositions, type NodeRunMark, connectionToEdge, hasEdge, removeElements, specToFlowEdges, specToFlowNodes, withLivePositions,
  withSelection,
  type BallastFlowNode, type FlowNode, type NodeHandles,
} from "./flow";
import { layoutPositions } from "./layout";
import { NodeCard } from "./NodeCard";
import { EDGE_ARROW, FlowEdge } from "./FlowEdge";
import { NoteNode } from "./NoteNode";
import { SpecMiniMap } from "./SpecMiniMap";
import { preloadNodePanel } from "./panel/NodePanelLazy";
import { DRAG_MIME } from "./Palette";
import { freshId, type EdgeSpec, type NodeSpec, type Position } from "./spec";
import { edgeKey, useBuilder } from "./store";
import { CANVAS_INSETS, FIT_VIEW, fitViewport } from "./viewport";
import { RUN_STATE_COLOURS } from "./runStateColours";
import { inTextField, shortcutsBlocked } from "../lib/shortcuts";

const nodeTypes = { ballast: NodeCard, note: NoteNode };
// One edge type: a smooth step, or a detour below the nodes for a loop back (FlowEdge.tsx).
const edgeTypes = { ballast: FlowEdge };


/** The minimap shows what the canvas marks: a compared version's change, else an error, else grey. */
const DIFF_COLOURS = { added: "#16a34a", removed: "#dc2626", changed: "#d97706" } as const;
function minimapColour(n: BallastFlowNode): string {
  if (n.data.run) return RUN_STATE_COLOURS[n.data.run.state];
  if (n.data.diff) return DIFF_COLOURS[n.data.diff];
  return n.data.errors.length ? "#dc2626" : "#94a3b8";
}
function minimapNodeColour(n: FlowNode): string {
  return n.type === "note" ? "#fde68a" : minimapColour(n);
}

// Props handed to React Flow are module constants: it copies most props into its store when
// their identity changes, and every store update re-runs every node's, edge's and minimap
// node's selector. A fresh object or function per render (the canvas renders on every drag
// frame) meant two extra store updates per frame and all 300 minimap nodes re-rendering.
const DEFAULT_EDGE_OPTIONS = { type: "ballast", markerEnd: EDGE_ARROW } as const;
const PRO_OPTIONS = { hideAttribution: true } as const;
const DELETE_KEYS = ["Delete", "Backspace"];
const MULTI_SELECT_KEYS = ["Shift", "Meta", "Control"];

/** React Flow's own fit-view icon (its Controls draw ours in its place: our fit, same look). */
function FitViewIcon() {
  return (
    <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 30" aria-hidden="true">
      <path d="M3.692 4.63c0-.53.4-.938.939-.938h5.215V0H4.708C2.13 0 0 2.054 0 4.63v5.216h3.692V4.631zM27.354 0h-5.2v3.692h5.17c.53 0 .984.4.984.939v5.215H32V4.631A4.624 4.624 0 0027.354 0zm.954 24.83c0 .532-.4.94-.939.94h-5.215v3.768h5.215c2.577 0 4.631-2.13 4.631-4.707v-5.139h-3.692v5.139zm-23.677.94c-.531 0-.939-.4-.939-.94v-5.138H0v5.139c0 2.577 2.13 4.707 4.708 4.707h5.138V25.77H4.631z" />
    </svg>
  );
}

/** The pointer resting on a node (no button held): fetch the node panel's chunk before the click. */
function preloadPanelOnHover(event: MouseEvent): void {
  if (event.buttons === 0) void preloadNodePanel();
}

/** Keyboard shortcuts, shown by the help overlay (``?``). */
/**
 * One line of the shortcut help: ``keys`` are key combinations (each drawn as keycaps,
 * ``sep`` between them: "or" for alternatives, "/" when they pair with the "/"-separated
 * parts of ``what``), or ``gesture`` is a mouse action (drawn as text).
 */
export interface Shortcut { keys?: string[]; sep?: "or" | "/"; gesture?: string; what: string }

/** The builder's shortcut help, in the order a new user needs them. */
export const SHORTCUTS: Shortcut[] = [
  { gesture: "Drag a kind from the palette onto the canvas", what: "add a node" },
  { gesture: "Drag from a handle to another node's handle", what: "connect" },
  { gesture: "Click · Shift+click · Shift+drag on empty canvas", what: "select · add to the selection · box-select" },
  { keys: ["Arrow keys", "Shift+Arrow keys"], sep: "/", what: "move the selection 5 / 20 px (each press one undo step)" },
  { keys: ["Delete", "Backspace"], sep: "or", what: "delete the selection" },
  { keys: ["Ctrl+C", "Ctrl+V"], sep: "/", what: "copy / paste (also between tabs)" },
  { keys: ["Ctrl+Z"], what: "undo" },
  { keys: ["Ctrl+Shift+Z", "Ctrl+Y"], sep: "or", what: "redo" },
  { keys: ["Ctrl+A"], what: "select all" },
  { keys: ["Shift+L"], what: "auto-layout" },
  { keys: ["F"], what: "fit the graph in view" },
  { keys: ["N"], what: "add a sticky note" },
  { keys: ["Escape"], what: "clear the selection, close dialogs" },
  { keys: ["?"], what: "this help" },
];

/** Same members, any order. */
function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x));
}

/** Keep the previous React Flow node object when nothing drawn changed (memoised node components skip it). */
function mergeNodes(prev: readonly FlowNode[], next: FlowNode[]): FlowNode[] {
  const byId = new Map(prev.map((n) => [n.id, n]));
  let same = prev.length === next.length;
  const out = next.map((n, i) => {
    const p = byId.get(n.id);
    if (!p) { same = false; return n; }
    const dataSame = p.data === n.data || shallowData(p.data as Record<string, unknown>, n.data as Record<string, unknown>);
    if (dataSame && p.position.x === n.position.x && p.position.y === n.position.y && !!p.selected === !!n.selected
      && p.width === n.width && p.height === n.height && p.draggable === n.draggable) {
      if (prev[i] !== p) same = false;
      return p;
    }
    same = false;
    return { ...n, measured: p.measured } as FlowNode;
  });
  return same ? (prev as FlowNode[]) : out;
}

function shallowData(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  // A key only one side has (a comparison's ``diff`` cleared) is a change too.
  if (Object.keys(a).length !== Object.keys(b).length) return false;
  for (const k of Object.keys(b)) {
    if (a[k] === b[k]) continue;
    if (k === "errors" && sameIssues(a[k] as ValidationIssue[], b[k] as ValidationIssue[])) continue;
    if (k === "handles" && sameHandles(a[k] as NodeHandles, b[k] as NodeHandles)) continue;
    return false;
  }
  return true;
}

/** Equal lists of strings. */
function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The same handles (compared field by field: every validation answer builds new ones for 300 nodes). */
function sameHandles(a: NodeHandles, b: NodeHandles): boolean {
  return a.hasInput === b.hasInput && a.defaultOutput === b.defaultOutput && sameStrings(a.inputs, b.inputs)
    && sameStrings(a.outputs, b.outputs) && sameStrings(a.optional, b.optional);
}

/** The same validation issues, in the same order. */
function sameIssues(a: readonly ValidationIssue[], b: readonly ValidationIssue[]): boolean {
  return a.length === b.length && a.every((x, i) => {
    const y = b[i] as ValidationIssue;
    return x.code === y.code && x.node === y.node && x.field === y.field && (x.path ?? null) === (y.path ?? null) && x.message === y.message;
  });
}

/** A version comparison drawn on the canvas: how each node and edge (by edgeKey) changed. */
export interface CanvasDiff {
  nodes: Readonly<Record<string, "added" | "removed" | "changed">>;
  edges: Readonly<Record<string, "added" | "removed">>;
}

/**
 * Memoised: the page re-renders for things the canvas does not draw (a pointer going down,
 * the save status, a toast); the canvas follows only the builder state and its own props.
 */
export const Canvas = memo(function Canvas({ onHelp, onMessage, diff, onDrawn, runMarks, onNodeOpen }: {
  /** Opens the keyboard-shortcut help; without it the canvas shows no "?" button and ignores the key. */
  onHelp?: () => void; onMessage: (text: string) => void; diff?: CanvasDiff;
  /** Called once, when every node has been drawn and measured (at once for an empty graph). */
  onDrawn?: () => void;
  /** A run's page: each node's state in the run, drawn on its card (read-only builders only). */
  runMarks?: Readonly<Record<string, NodeRunMark>>;
  /** Called with a graph node's id when it is clicked (a run's page opens its step inspector). */
  onNodeOpen?: (nodeId: string) => void;
}) {
  // A run's page resizes the canvas as its inspector opens and closes: the graph is fitted again then.
  const refitOnResize = !!runMarks;
  const b = useBuilder();
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
    const view = fitViewport(rf.getNodesBounds(all), start ? rf.getNodesBounds([start]) : null, width, height, FIT_VIEW, CANVAS_INSETS);
    if (view) void rf.setViewport(view, { duration });
  }, [rf, flowStore]);
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

  const addNode = useCallback((kind: string, position?: Position) => {
    const s = bRef.current.spec;
    const id = freshId(kind, new Set(s.nodes.map((n) => n.id)));
    const at = position ?? rf.screenToFlowPosition({ x: window.innerWidth / 2, y: window.innerHeight / 2 });
    const node: NodeSpec = { id, kind, config: {}, position: { x: Math.round(at.x), y: Math.round(at.y) } };
    bRef.current.change((g) => ({ ...g, nodes: [...g.nodes, node] }));
    bRef.current.select({ nodes: [id], edges: [], notes: [], field: null });
  }, [rf]);

  const onDrop = useCallback((e: DragEvent) => {
    e.preventDefault();
    if (bRef.current.readOnly) return;
    const kind = e.dataTransfer.getData(DRAG_MIME);
    if (!kind) return;
    const p = rf.screenToFlowPosition({ x: e.clientX, y: e.clientY });
    addNode(kind, { x: p.x - 90, y: p.y - 30 });
  }, [rf, addNode]);

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

  const copy = useCallback((): Fragment | null => {
    const s = bRef.current.spec;
    const sel = selRef.current;
    if (sel.nodes.length === 0 && sel.notes.length === 0) return null;
    const fragment = copyFragment(s, new Set(sel.nodes), new Set(sel.notes));
    const text = JSON.stringify(fragment);
    try { window.localStorage.setItem(CLIPBOARD_STORAGE_KEY, text); } catch { /* storage full or disabled */ }
    void navigator.clipboard?.writeText(text).catch(() => undefined);
    onMessage(`Copied ${fragment.nodes.length} node${fragment.nodes.length === 1 ? "" : "s"}.`);
    return fragment;
  }, [onMessage]);

  // The last pointer position (screen px, from a passive document listener): a paste lands
  // there when it is over the canvas's pane.
  const pointer = useRef<{ x: number; y: number } | null>(null);
  useEffect(() => {
    const onMove = (e: PointerEvent) => { pointer.current = { x: e.clientX, y: e.clientY }; };
    document.addEventListener("pointermove", onMove, { passive: true });
    return () => document.removeEventListener("pointermove", onMove);
  }, []);
  const paste = useCallback((fragment: Fragment | null) => {
    if (!fragment || bRef.current.readOnly) return;
    const p = pointer.current;
    const onPane = p && document.elementFromPoint(p.x, p.y)?.closest(".react-flow__pane, .react-flow__node");
    const at = p && onPane ? rf.screenToFlowPosition(p) : null;
    const r = pasteFragment(bRef.current.spec, fragment, pasteOffset(bRef.current.spec, fragment, at));
    bRef.current.change(() => r.spec);
    bRef.current.select({ nodes: r.nodeIds, notes: r.noteIds, edges: [], field: null });
  }, [rf]);

  // Copy/paste: the native paste event carries the system clipboard (other windows); a
  // synthetic or blocked one falls back to localStorage (other tabs of this browser).
  const pendingPaste = useRef<number | null>(null);
  useEffect(() => {
    const fromStorage = () => parseFragment(window.localStorage.getItem(CLIPBOARD_STORAGE_KEY));
    const onPaste = (e: ClipboardEvent) => {
      if (inTextField(e.target)) return;
      if (pendingPaste.current !== null) { window.clearTimeout(pendingPaste.current); pendingPaste.current = null; }
      const fragment = parseFragment(e.clipboardData?.getData("text/plain")) ?? fromStorage();
      if (fragment) { e.preventDefault(); paste(fragment); }
    };
    const onCopy = (e: ClipboardEvent) => {
      if (inTextField(e.target) || window.getSelection()?.toString()) return;
      const s = bRef.current.spec;
      const sel = selRef.current;
      if (sel.nodes.length === 0 && sel.notes.length === 0) return;
      e.clipboardData?.setData("text/plain", JSON.stringify(copyFragment(s, new Set(sel.nodes), new Set(sel.notes))));
      e.preventDefault();
    };
    const onKey = (e: KeyboardEvent) => {
      if (shortcutsBlocked(e)) return;
      const mod = e.ctrlKey || e.metaKey;
      const key = e.key.toLowerCase();
      const api = bRef.current;
      if (mod && key === "z" && !e.shiftKey) { e.preventDefault(); if (!api.readOnly) api.undo(); return; }
      if (mod && ((key === "z" && e.shiftKey) || key === "y")) { e.preventDefault(); if (!api.readOnly) api.redo(); return; }
      if (mod && key === "c") { copy(); return; }
      if (mod && key === "v") {
        if (api.readOnly) return;
        pendingPaste.current = window.setTimeout(() => { pendingPaste.current = null; paste(fromStorage()); }, 80);
        return;
      }
      if (mod && key === "a") {
        e.preventDefault();
        api.select({ nodes: api.spec.nodes.map((n) => n.id), notes: (api.spec.notes ?? []).map((n) => n.id), edges: [], field: null });
        return;
      }
      if (mod || e.altKey) return;
      if (e.key === "?" && onHelp) { e.preventDefault(); onHelp(); return; }
      if (key === "f") { e.preventDefault(); fit(); return; }
      if (e.key === "L" && e.shiftKey && !api.readOnly) { e.preventDefault(); layout(); return; }
      if (key === "n" && !e.shiftKey && !api.readOnly) { e.preventDefault(); addNote(); return; }
      if (e.key === "Escape") api.select({ nodes: [], edges: [], notes: [], field: null });
    };
    document.addEventListener("paste", onPaste);
    document.addEventListener("copy", onCopy);
    window.addEventListener("keydown", onKey);
    return () => {
      document.removeEventListener("paste", onPaste);
      document.removeEventListener("copy", onCopy);
      window.removeEventListener("keydown", onKey);
    };
  }, [copy, paste, layout, addNote, onHelp, fit]);

  return (
    <div className="canvas" onDrop={onDrop} onDragOver={onDragOver} data-testid="canvas">
      <ReactFlow<FlowNode, Edge>
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        edgeTypes={edgeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={readOnly ? undefined : onConnect}
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
        zoomOnScroll={!runMarks}
        preventScrolling={!runMarks}
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
          {!readOnly && <button type="button" onClick={() => b.undo()} disabled={!b.canUndo} title="Undo (Ctrl+Z)">Undo</button>}
          {!readOnly && <button type="button" onClick={() => b.redo()} disabled={!b.canRedo} title="Redo (Ctrl+Shift+Z)">Redo</button>}
          <button type="button" onClick={() => fit()} title="Fit view (F)">Fit</button>
          {!readOnly && <button type="button" onClick={layout} disabled={!initialised && spec.nodes.length > 0} title="Auto-layout (Shift+L)">Auto-layout</button>}
          {!readOnly && <button type="button" onClick={addNote} title="Add a sticky note (N)">Note</button>}
          {onHelp && <button type="button" onClick={onHelp} title="Keyboard shortcuts (?)" aria-label="Keyboard shortcuts">?</button>}
        </Panel>
        {spec.nodes.length === 0 && !readOnly && (
          <Panel position="top-center" className="canvas-empty">Drag a node kind from the palette to start, beginning with Start.</Panel>
        )}
      </ReactFlow>
    </div>
  );
});
