// Copy and paste on the canvas: a copy goes to localStorage (other tabs) and the system clipboard;
// a paste lands at the pointer when it rests on the canvas, else beside the copied nodes.
import { useReactFlow, type Edge } from "@xyflow/react";
import { useCallback, useEffect, useRef, type RefObject } from "react";
import { CLIPBOARD_STORAGE_KEY, copyFragment, pasteFragment, pasteOffset, type Fragment } from "./clipboard";
import type { FlowNode } from "./flow";
import type { BuilderApi, Selection } from "./store";

/**
 * ``copy()`` puts the selection (read through ``selRef``) on both clipboards and says so with
 * ``onMessage``; it returns the fragment, or null when nothing is selected. ``paste(fragment)``
 * adds it to the spec (read through ``bRef``) as one undo step and selects what it added;
 * nothing in a read-only builder.
 */
export function useCanvasClipboard(bRef: RefObject<BuilderApi>, selRef: RefObject<Selection>, onMessage: (text: string) => void) {
  const rf = useReactFlow<FlowNode, Edge>();
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
  }, [bRef, selRef, onMessage]);

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
  }, [bRef, rf]);

  return { copy, paste };
}
