// The builder's collapsible palette and side panel: whether each is open (kept per browser), and the narrow rail a closed one leaves.
import { useCallback, useState } from "react";

const KEY = "ballast.builder.docked.";

function stored(name: string): boolean {
  try {
    return window.localStorage.getItem(KEY + name) !== "closed";
  } catch {
    return true; // storage refused (private mode): open, as on a first visit
  }
}

/**
 * ``[open, setOpen]`` for the dock ``name`` ("palette", "panel"): open on a first visit,
 * then as the user left it in this browser (localStorage), so a small screen stays collapsed.
 */
export function useDocked(name: string): [boolean, (open: boolean) => void] {
  const [open, setState] = useState(() => stored(name));
  const set = useCallback((next: boolean) => {
    setState(next);
    try { window.localStorage.setItem(KEY + name, next ? "open" : "closed"); } catch { /* kept for this page only */ }
  }, [name]);
  return [open, set];
}

/** Width (px) of a closed dock's rail. */
export const RAIL_WIDTH = 36;

/** A closed dock: a rail with the button that opens it again and its name written down the side. */
export function DockRail({ side, label, onOpen }: { side: "left" | "right"; label: string; onOpen: () => void }) {
  return (
    <aside className={`dock-rail dock-rail--${side}`} aria-label={`${label} (hidden)`}>
      <button type="button" className="dock-toggle" aria-label={`Show ${label.toLowerCase()}`} aria-expanded="false"
        title={`Show ${label.toLowerCase()}`} onClick={onOpen}>{side === "left" ? "»" : "«"}</button>
      <button type="button" className="dock-rail__label" tabIndex={-1} onClick={onOpen}>{label}</button>
    </aside>
  );
}

/** The button on an open dock that closes it to its rail. */
export function DockHide({ side, label, onHide }: { side: "left" | "right"; label: string; onHide: () => void }) {
  return (
    <button type="button" className={`dock-toggle dock-toggle--${side}`} aria-label={`Hide ${label.toLowerCase()}`} aria-expanded="true"
      title={`Hide ${label.toLowerCase()} (more room for the canvas)`} onClick={onHide}>{side === "left" ? "«" : "»"}</button>
  );
}
