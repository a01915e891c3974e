// The list of validation errors: click one to select its node and focus the field in the side panel.
import type { ValidationIssue } from "../api/types";
import { useReactFlow } from "@xyflow/react";
import { useState } from "react";
import { useBuilder } from "./store";

/** The node-relative field of an issue: ``field``, else derived from a graph-wide ``nodes[i].x.y`` path. */
export function issueField(issue: ValidationIssue): string | null {
  if (issue.field) return issue.field;
  const m = issue.path?.match(/^nodes\[\d+\]\.(.+)$/);
  return m ? (m[1] as string) : null;
}

export function ErrorsPanel({ pending, failed }: { pending: boolean; failed: string | null }) {
  const { validation, spec, select } = useBuilder();
  const [open, setOpen] = useState(true);
  const rf = useReactFlow();
  const pick = (e: ValidationIssue) => {
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
  return (
    <section className={`errors-panel${errors.length ? " errors-panel--bad" : ""}`} aria-label="Problems">
      <button type="button" className="errors-panel__toggle" onClick={() => setOpen(!open)} aria-expanded={open}>
        <span className={`dot ${errors.length ? "dot--bad" : validation ? "dot--ok" : ""}`} /> {headline}{warned}
        {pending && validation !== null && <span className="muted"> · checking…</span>}
      </button>
      {open && errors.length + warnings.length > 0 && (
        <ul className="errors-panel__list">
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
    </section>
  );
}
