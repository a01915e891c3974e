// The canvas's node picker: opened by a card's "+" or an edge dropped on empty canvas; adds the picked node, connects it and keeps it in view.
import type { NodeKindInfo } from "../api/types";
import { useReactFlow, type Edge, type FinalConnectionState, type InternalNode, type Node } from "@xyflow/react";
import { useCallback, useMemo, useState, type ReactNode, type RefObject } from "react";
import type { AddAfter } from "./addAfter";
import type { FlowNode } from "./flow";
import { NodePicker } from "./NodePicker";
import { addConnected, clearOf, placeFrom, type Box, type PickerOrigin } from "./picker";
import type { Position } from "./spec";
import type { BuilderApi } from "./store";

/** The canvas's overlays: nothing the user adds or drops is left under one of them. */
const OVERLAYS = ".canvas-toolbar, .react-flow__minimap, .react-flow__controls, .problems, .canvas-empty";

/** A card's box before React Flow has measured it (flow px: 200 wide, about 80 high). */
export const CARD = { width: 200, height: 80 } as const;

/** The screen boxes of the overlays inside ``canvas``, and the canvas's own box. */
export function overlayBoxes(canvas: HTMLElement): { overlays: Box[]; area: Box } {
  const r = (el: Element): Box => { const b = el.getBoundingClientRect(); return { x: b.x, y: b.y, width: b.width, height: b.height }; };
  return { overlays: [...canvas.querySelectorAll(OVERLAYS)].map(r).filter((b) => b.width > 0 && b.height > 0), area: r(canvas) };
}

interface Open {
  origin: PickerOrigin | null;
  /** Where the node goes (flow px), unless an insert places it. */
  at: Position;
  /** The picker's corner, px from the canvas's top-left. */
  screen: { x: number; y: number };
  /** "+" on a connected output puts the node into that edge. */
  insert: boolean;
}

/**
 * The picker's state and handlers for the canvas in ``canvas``: ``addAfter`` for the cards'
 * "+", ``onConnectEnd`` for React Flow (an edge let go over the empty pane opens the picker
 * there), ``openAt`` for a picker with nothing to connect, and the picker element (null when
 * closed). A picked node is added connected, selected, and the view pans (same zoom) when it
 * would land off the canvas or under an overlay.
 */
export function useNodePicker(bRef: RefObject<BuilderApi>, canvas: RefObject<HTMLDivElement | null>) {
  const rf = useReactFlow<FlowNode, Edge>();
  const [open, setOpen] = useState<Open | null>(null);
  const corner = useCallback((x: number, y: number) => {
    const c = canvas.current?.getBoundingClientRect();
    return { x: x - (c?.left ?? 0), y: y - (c?.top ?? 0) };
  }, [canvas]);

  const addAfter: AddAfter = useCallback((origin, index, count, anchor) => {
    if (bRef.current.readOnly) return;
    const at = placeFrom(bRef.current.spec, origin, index, count);
    setOpen({ origin, at, screen: corner(anchor.right + 8, anchor.top - 24), insert: true });
  }, [bRef, corner]);

  const onConnectEnd = useCallback((event: MouseEvent | TouchEvent, state: FinalConnectionState<InternalNode<Node>>) => {
    if (bRef.current.readOnly || state.isValid || !state.fromNode || !state.fromHandle) return;
    // Only the empty pane: let go over a node or an overlay, the edge is simply not drawn.
    if (!(event.target instanceof Element) || !event.target.classList.contains("react-flow__pane")) return;
    const point = "changedTouches" in event ? event.changedTouches[0] : event;
    if (!point) return;
    const p = rf.screenToFlowPosition({ x: point.clientX, y: point.clientY });
    const origin: PickerOrigin = { nodeId: state.fromNode.id, handleId: state.fromHandle.id ?? null, type: state.fromHandle.type };
    // The new card's input (left edge, mid-height) at the drop point; its output there for an input's edge.
    const at = { x: origin.type === "source" ? p.x : p.x - CARD.width, y: p.y - CARD.height / 2 };
    setOpen({ origin, at, screen: corner(point.clientX, point.clientY), insert: false });
  }, [bRef, rf, corner]);

  const openAt = useCallback((clientX: number, clientY: number) => {
    const p = rf.screenToFlowPosition({ x: clientX, y: clientY });
    setOpen({ origin: null, at: { x: p.x - CARD.width / 2, y: p.y - CARD.height / 2 }, screen: corner(clientX, clientY), insert: false });
  }, [rf, corner]);

  const close = useCallback(() => setOpen(null), []);

  const pick = useCallback((kind: NodeKindInfo) => {
    const o = open;
    setOpen(null);
    if (!o || bRef.current.readOnly) return;
    const added = addConnected(bRef.current.spec, kind, o.at, o.origin, o.insert);
    bRef.current.change(() => added.spec);
    bRef.current.select({ nodes: [added.id], edges: [], notes: [], field: null });
    const placed = added.spec.nodes.find((n) => n.id === added.id)?.position;
    const el = canvas.current;
    if (!placed || !el) return;
    // Keep the new card in view and clear of the overlays: pan, never zoom.
    const { overlays, area } = overlayBoxes(el);
    const { x, y, zoom } = rf.getViewport();
    const tl = rf.flowToScreenPosition(placed);
    const box = { x: tl.x, y: tl.y, width: CARD.width * zoom, height: CARD.height * zoom };
    const inArea = { x: area.x + 8, y: area.y + 8, width: area.width - 16, height: area.height - 16 };
    const inside = box.x >= inArea.x && box.y >= inArea.y && box.x + box.width <= inArea.x + inArea.width && box.y + box.height <= inArea.y + inArea.height;
    const start = inside ? box : {
      ...box,
      x: Math.min(Math.max(box.x, inArea.x), inArea.x + inArea.width - box.width),
      y: Math.min(Math.max(box.y, inArea.y), inArea.y + inArea.height - box.height),
    };
    const to = clearOf(start, overlays, inArea);
    if (to.x !== box.x || to.y !== box.y) void rf.setViewport({ x: x + to.x - box.x, y: y + to.y - box.y, zoom }, { duration: 200 });
  }, [open, bRef, rf, canvas]);

  const element: ReactNode = useMemo(() => {
    if (!open) return null;
    const c = canvas.current;
    return (
      <NodePicker catalogue={bRef.current.catalogue} origin={open.origin} at={open.screen}
        bounds={{ width: c?.clientWidth ?? 800, height: c?.clientHeight ?? 600 }} onPick={pick} onClose={close} />
    );
  }, [open, pick, close, bRef, canvas]);

  return { addAfter, onConnectEnd, openAt, picker: element, pickerOpen: open !== null };
}
