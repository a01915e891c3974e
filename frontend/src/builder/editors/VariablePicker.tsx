// The variable picker: a searchable, keyboard-driven list of the names a node can read, opened by a button or by typing {{.
import { useEffect, useMemo, useRef, useState, type MutableRefObject } from "react";
import type { AssistVariable } from "./assist";

/** The keys a picker opened by typing takes from the editor: true when it used the key. */
export type PickerKeys = (key: "ArrowDown" | "ArrowUp" | "Enter" | "Tab" | "Escape") => boolean;

interface Props {
  variables: readonly AssistVariable[];
  onPick(path: string): void;
  onClose(): void;
  /** DOM id of the list (the opener's aria-controls). */
  id: string;
  /**
   * Opened by typing "{{": the words typed after the braces, which filter the list. The
   * keyboard stays in the editor (a fluent "{{ name }}" types through), so there is no search
   * box; the editor hands the picker its navigation keys through ``keys``.
   */
  typed?: string;
  keys?: MutableRefObject<PickerKeys | null>;
}

/** ``variables`` whose path contains every word of ``query`` (case-insensitive), in order. */
export function filterVariables(variables: readonly AssistVariable[], query: string): AssistVariable[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  return variables.filter((v) => words.every((w) => v.path.toLowerCase().includes(w) || v.group.toLowerCase().includes(w)));
}

/**
 * A popover under the field: a search box (focused on open), the names grouped as
 * ``panel/variables.ts`` orders them; arrows move, Enter or a click inserts, Escape closes.
 */
export function VariablePicker({ variables, onPick, onClose, id, typed, keys }: Props) {
  const [searched, setQuery] = useState("");
  const query = typed ?? searched;
  const [active, setActive] = useState(0);
  const search = useRef<HTMLInputElement>(null);
  const shown = useMemo(() => filterVariables(variables, query), [variables, query]);
  useEffect(() => {
    if (typed === undefined) search.current?.focus();
  }, [typed === undefined]); // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => setActive(0), [typed]);
  useEffect(() => {
    document.getElementById(`${id}-opt-${active}`)?.scrollIntoView?.({ block: "nearest" });
  }, [active, id]);

  /** Move, pick or close for one key; false for a key the picker does not use. */
  function handle(key: string): boolean {
    if (key === "ArrowDown") setActive((i) => Math.min(shown.length - 1, i + 1));
    else if (key === "ArrowUp") setActive((i) => Math.max(0, i - 1));
    else if (key === "Enter" || (key === "Tab" && typed !== undefined)) {
      const v = shown[active];
      if (!v) return false; // nothing matches: Enter is the editor's own again
      onPick(v.path);
    } else if (key === "Escape") onClose();
    else return false;
    return true;
  }
  useEffect(() => {
    if (!keys) return;
    keys.current = handle;
    return () => { keys.current = null; };
  });

  function onKeyDown(e: React.KeyboardEvent) {
    e.stopPropagation(); // the canvas's single-key shortcuts must not see these keys
    if (handle(e.key)) e.preventDefault();
  }

  let group = "";
  return (
    <div className="variable-picker nokey nodrag nowheel" role="dialog" aria-label="Insert a variable" onKeyDown={onKeyDown}>
      {typed === undefined ? (
        <div className="variable-picker__bar">
          <input ref={search} className="variable-picker__search" type="search" placeholder="Search variables…" value={query}
            aria-label="Search variables" aria-controls={id} aria-activedescendant={shown.length > 0 ? `${id}-opt-${active}` : undefined}
            onChange={(e) => { setQuery(e.target.value); setActive(0); }} />
        </div>
      ) : (
        <div className="variable-picker__bar variable-picker__hint" aria-live="polite">
          {query.trim() ? <>Matching <code>{query.trim()}</code></> : "Keep typing to filter"} · ↑↓ to move, Enter to insert, Esc to close
        </div>
      )}
      <ul className="variable-picker__list" role="listbox" id={id} aria-label="Variables">
        {shown.length === 0 && <li className="variable-picker__empty">No variable matches.</li>}
        {shown.map((v, i) => {
          const heading = v.group !== group ? (group = v.group) : null;
          return [
            heading && <li key={`g-${heading}`} className="variable-picker__group" role="presentation">{heading}</li>,
            <li key={v.path} id={`${id}-opt-${i}`} role="option" aria-selected={i === active}
              className={`variable-picker__item${i === active ? " is-active" : ""}`}
              onMouseEnter={() => setActive(i)} onMouseDown={(e) => { e.preventDefault(); onPick(v.path); }}>
              <code>{v.path}</code>
              {v.detail && <span className="variable-picker__detail">{v.detail}</span>}
            </li>,
          ];
        })}
      </ul>
    </div>
  );
}
