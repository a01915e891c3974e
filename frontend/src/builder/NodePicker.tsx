// The node picker: a search box and a list of node kinds, opened by "+" on a handle or an edge dropped on the canvas; the keyboard picks too.
import type { NodeKindInfo } from "../api/types";
import { useEffect, useId, useMemo, useRef, useState, type KeyboardEvent } from "react";
import { categoryColour } from "./NodeCard";
import { movePick, pickerKinds, type PickerOrigin } from "./picker";

export interface NodePickerProps {
  catalogue: readonly NodeKindInfo[];
  origin: PickerOrigin | null;
  /** Where the picker's top-left corner goes, in px from the canvas's top-left (moved in to stay on the canvas). */
  at: { x: number; y: number };
  /** The canvas's size (px), to keep the picker on it. */
  bounds: { width: number; height: number };
  onPick: (kind: NodeKindInfo) => void;
  onClose: () => void;
}

const WIDTH = 280;
const HEIGHT = 340;

/**
 * A searchable list of the kinds that fit ``origin`` (kinds with an input after an output,
 * with an output before an input). Typing filters, ArrowUp/ArrowDown/Home/End move, Enter
 * or a click picks, Escape or a press outside closes.
 */
export function NodePicker({ catalogue, origin, at, bounds, onPick, onClose }: NodePickerProps) {
  const [query, setQuery] = useState("");
  const [active, setActive] = useState(0);
  const kinds = useMemo(() => pickerKinds(catalogue, query, origin), [catalogue, query, origin]);
  const listId = useId();
  const box = useRef<HTMLDivElement>(null);
  const list = useRef<HTMLUListElement>(null);
  const closeRef = useRef(onClose);
  closeRef.current = onClose;
  useEffect(() => {
    const away = (e: PointerEvent) => {
      if (box.current && !box.current.contains(e.target as Node)) closeRef.current();
    };
    // Escape closes it wherever the focus went (a click on a row leaves the search box).
    const esc = (e: globalThis.KeyboardEvent) => { if (e.key === "Escape") closeRef.current(); };
    // Capture: React Flow's pane stops pointer events it handles (a pan) from bubbling.
    document.addEventListener("pointerdown", away, true);
    window.addEventListener("keydown", esc);
    return () => { document.removeEventListener("pointerdown", away, true); window.removeEventListener("keydown", esc); };
  }, []);
  useEffect(() => {
    list.current?.querySelector(`[data-index="${active}"]`)?.scrollIntoView?.({ block: "nearest" });
  }, [active]);
  const onKeyDown = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === "Escape") { e.preventDefault(); return; } // closed by the window's listener
    if (e.key === "Enter") {
      e.preventDefault();
      const k = kinds[Math.min(active, kinds.length - 1)];
      if (k) onPick(k);
      return;
    }
    const next = movePick(active, kinds.length, e.key);
    if (next !== active || ["ArrowDown", "ArrowUp", "PageDown", "PageUp"].includes(e.key)) {
      if (e.key !== "Home" && e.key !== "End") e.preventDefault();
      setActive(next);
    }
  };
  const left = Math.max(8, Math.min(at.x, bounds.width - WIDTH - 8));
  const top = Math.max(8, Math.min(at.y, bounds.height - HEIGHT - 8));
  const heading = origin?.type === "target" ? "Add a node before" : origin ? "Add a node after" : "Add a node";
  return (
    <div ref={box} className="node-picker nokey nodrag nopan nowheel" style={{ left, top, width: WIDTH, maxHeight: HEIGHT }}
      role="group" aria-label="Node picker" data-testid="node-picker">
      <div className="node-picker__head">{heading}</div>
      <input className="node-picker__search" type="search" placeholder="Search node kinds…" autoFocus value={query}
        role="combobox" aria-expanded="true" aria-controls={listId} aria-autocomplete="list" aria-label="Search node kinds"
        aria-activedescendant={kinds.length ? `${listId}-${Math.min(active, kinds.length - 1)}` : undefined}
        onChange={(e) => { setQuery(e.target.value); setActive(0); }} onKeyDown={onKeyDown} />
      <ul ref={list} id={listId} className="node-picker__list" role="listbox" aria-label="Node kinds">
        {kinds.map((k, i) => (
          <li key={k.kind} id={`${listId}-${i}`} role="option" aria-selected={i === active} data-index={i} data-kind={k.kind}
            className={`node-picker__item${i === active ? " node-picker__item--active" : ""}`}
            style={{ ["--kind" as string]: categoryColour(k.category) }}
            onPointerMove={() => { if (i !== active) setActive(i); }}
            onClick={() => onPick(k)}>
            <span className="node-picker__title">{k.title}</span>
            <span className="node-picker__desc">{k.description}</span>
          </li>
        ))}
        {kinds.length === 0 && <li className="node-picker__empty muted" role="presentation">No node kind matches “{query}”.</li>}
      </ul>
    </div>
  );
}
