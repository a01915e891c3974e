// A version diff (GET /api/v1/graphs/<id>/diff/) as list items, and per-node status for the canvas to colour.
import type { DiffEdge, FieldChange, VersionDiff } from "../../api/types";

export type ChangeKind = "added" | "removed" | "changed";

export interface DiffItem {
  change: ChangeKind;
  /** What the item is about: "node", "edge", "setting", "state key", "input schema", "description", "note", "position". */
  subject: string;
  /** The node id, edge text, setting name ... */
  name: string;
  /** For changes: each changed field with its old and new value. */
  fields?: { name: string; from: unknown; to: unknown }[];
  /** The node this item is about (for selecting it on the canvas). */
  node?: string;
}

export function edgeText(e: DiffEdge): string {
  const src = e.source_handle ? `${e.source}.${e.source_handle}` : e.source;
  const dst = e.target_handle ? `${e.target}.${e.target_handle}` : e.target;
  return `${src} → ${dst}`;
}

function fieldList(fields: Record<string, FieldChange>, skip: readonly string[] = []) {
  return Object.entries(fields)
    .filter(([name]) => !skip.includes(name))
    .map(([name, c]) => ({ name, from: c.from, to: c.to }));
}

function changeOf(c: FieldChange): ChangeKind {
  return c.from === undefined || c.from === null ? "added" : c.to === undefined || c.to === null ? "removed" : "changed";
}

/**
 * The diff as two lists: ``logic`` (nodes, edges, config, settings, state, input schema,
 * description: what a run would do differently) and ``layout`` (positions and sticky notes).
 * An older server that reports a moved node under ``nodes.changed`` (field ``position``) has
 * that move listed under layout too.
 */
export function diffItems(diff: VersionDiff): { logic: DiffItem[]; layout: DiffItem[] } {
  const logic: DiffItem[] = [];
  const layout: DiffItem[] = [];
  for (const id of diff.nodes.added) logic.push({ change: "added", subject: "node", name: id, node: id });
  for (const id of diff.nodes.removed) logic.push({ change: "removed", subject: "node", name: id });
  const moved = new Set(diff.layout?.positions ?? []);
  for (const { id, fields } of diff.nodes.changed) {
    if ("position" in fields) moved.add(id);
    const rest = fieldList(fields, ["position"]);
    if (rest.length > 0) logic.push({ change: "changed", subject: "node", name: id, node: id, fields: rest });
  }
  for (const e of diff.edges.added) logic.push({ change: "added", subject: "edge", name: edgeText(e) });
  for (const e of diff.edges.removed) logic.push({ change: "removed", subject: "edge", name: edgeText(e) });
  for (const [name, c] of Object.entries(diff.settings)) logic.push({ change: changeOf(c), subject: "setting", name, fields: [{ name, from: c.from, to: c.to }] });
  for (const [name, c] of Object.entries(diff.state)) logic.push({ change: changeOf(c), subject: "state key", name, fields: [{ name, from: c.from, to: c.to }] });
  if (diff.input_schema) logic.push({ change: "changed", subject: "input schema", name: "input schema", fields: [{ name: "input_schema", ...diff.input_schema }] });
  if (diff.description) logic.push({ change: "changed", subject: "description", name: "description", fields: [{ name: "description", ...diff.description }] });
  for (const id of [...moved].sort()) layout.push({ change: "changed", subject: "position", name: id, node: id });
  const notes = diff.layout?.notes;
  if (notes) {
    for (const id of notes.added) layout.push({ change: "added", subject: "note", name: id });
    for (const id of notes.removed) layout.push({ change: "removed", subject: "note", name: id });
    for (const { id, fields } of notes.changed) layout.push({ change: "changed", subject: "note", name: id, fields: fieldList(fields) });
  }
  return { logic, layout };
}

/** ``{node id: "added" | "removed" | "changed"}`` for the canvas (moves alone are not changes). */
export function diffNodeStatus(diff: VersionDiff): Record<string, ChangeKind> {
  const out: Record<string, ChangeKind> = {};
  for (const id of diff.nodes.added) out[id] = "added";
  for (const id of diff.nodes.removed) out[id] = "removed";
  for (const { id, fields } of diff.nodes.changed) if (Object.keys(fields).some((f) => f !== "position")) out[id] = "changed";
  return out;
}
