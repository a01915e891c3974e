// The canvas's keyboard shortcuts and copy/paste events (undo, redo, select all, fit, layout, note, help, Escape).
import { useEffect, useRef, type RefObject } from "react";
import { CLIPBOARD_STORAGE_KEY, copyFragment, parseFragment, type Fragment } from "./clipboard";
import { inTextField, shortcutsBlocked } from "../lib/shortcuts";
import type { BuilderApi, Selection } from "./store";

export interface CanvasActions {
  copy: () => unknown;
  paste: (fragment: Fragment | null) => void;
  layout: () => void;
  addNote: () => void;
  onHelp?: (() => void) | undefined;
  fit: () => void;
}

/**
 * Listens on the document for copy, paste and the canvas's keys while mounted; every key
 * passes shortcutsBlocked (no shortcut fires in a dialog, a field or an editor). The builder
 * and the selection are read through ``bRef`` and ``selRef`` when a key comes.
 */
export function useCanvasKeys(bRef: RefObject<BuilderApi>, selRef: RefObject<Selection>,
  { copy, paste, layout, addNote, onHelp, fit }: CanvasActions): void {
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
  }, [bRef, selRef, copy, paste, layout, addNote, onHelp, fit]);
}
