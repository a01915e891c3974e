// The problems count over the canvas, which opens the list of validation errors: click one to select its node and focus the field.
import type { ValidationIssue } from "../api/types";
import { useReactFlow } from "@xyflow/react";
import { createContext, useContext, useEffect, useRef, useState } from "react";
import { useBuilder } from "./store";

/** The node-relative field of an issue: ``field``, else derived from a graph-wide ``nodes[i].x.y`` path. */
export function issueField(issue: ValidationIssue): string | null {
  if (issue.field) return issue.field;
  const m = issue.path?.match(/^nodes\[\d+\]\.(.+)$/);
  return m ? (m[1] as string) : null;
}

/** Validation's progress for the problems count: a request in flight, or why it failed (null: it answered). */
export interface ValidationStatus { pending: boolean; failed: string | null }

export const ValidationStatusContext = createContext<ValidationStatus>({ pending: false, failed: null });

/**
 * The problems count (over the canvas, at its bottom centre): "3 problems · 1 warning", which
 * opens the list above it; a click on an item selects its node, focuses its field and closes
 * the list. It never grows over the canvas by itself: the list opens only when asked, is at
 * most half the canvas high, and Escape or a press elsewhere closes it.
 */
export function ErrorsPanel() {
  const { pending, failed } = useContext(ValidationStatusContext);
  const { validation, spec, select } = useBuilder();
  const [open, setOpen] = useState(false);
  const box = useRef<HTMLElement>(null);
  const rf = useReactFlow();
  useEffect(() => {
    if (!open) return;
    const away = (e: PointerEvent) => { if (box.current && !box.current.contains(e.target as Node)) setOpen(false); };
    const esc = (e: KeyboardEvent) => { if (e.key === "Escape") setOpen(false); };
    document.addEventListener("pointerdown", away, true);
    window.addEventListener("keydown", esc);
    return () => { document.removeEventListener("pointerdown", away, true); window.removeEventListener("keydown", esc); };
  }, [open]);
  const pick = (e: ValidationIssue) => {
    setOpen(false);
    select({ nodes: e.node ? [e.node] : [], edges: [], notes: [], field: e.node ? issueField(e) : null });
    if (e.node) void rf.fitView({ nodes: [{ id: e.node }], maxZoom: 1, duration: 250, padding: 0.5 });
  };
  const errors = validation?.errors ?? [];
  const warnings = validation?.warnings ?? [];
  // "Label (id)": two nodes may share a label, never an id.
  const label = (id: string | null) => {
    if (!id) return "Graph";
    const text = spec.nodes.find((n) => n.id === id)?.label;
    return text && text !== id ? `${text} (${id})` : id;
  };
  const headline = failed ? `Validation unavailable: ${failed}` : validation === null ? "Checking…"
    : errors.length === 0 ? "No problems" : `${errors.length} problem${errors.length > 1 ? "s" : ""}`;
  const warned = warnings.length > 0 && validation !== null && !failed ? ` · ${warnings.length} warning${warnings.length > 1 ? "s" : ""}` : "";
  const items = errors.length + warnings.length;
  return (
    <section ref={box} className={`problems errors-panel${errors.length ? " errors-panel--bad" : ""}`} aria-label="Problems">
      {open && items > 0 && (
        <ul className="errors-panel__list" aria-label="Problem list">
          {[...errors, ...warnings].map((e, i) => (
            <li key={`${e.code}-${e.node}-${e.path}-${i}`}>
              <button type="button" className={`errors-panel__item${i >= errors.length ? " errors-panel__item--warning" : ""}`} data-node={e.node ?? ""}
                onClick={() => pick(e)}>
                {i >= errors.length && <span className="errors-panel__tag">Warning</span>}
                <strong>{label(e.node)}</strong>
                {issueField(e) && <code>{issueField(e)}</code>}
                <span>{e.message}</span>
              </button>
            </li>
          ))}
        </ul>
      )}
      <button type="button" className="errors-panel__toggle" onClick={() => setOpen(!open)} aria-expanded={items > 0 ? open : undefined}
        title={items ? (open ? "Hide the list" : "Show the list") : undefined}>
        <span className={`dot ${errors.length ? "dot--bad" : validation ? "dot--ok" : ""}`} /> {headline}{warned}
        {pending && validation !== null && <span className="muted"> · checking…</span>}
      </button>
    </section>
  );
}
