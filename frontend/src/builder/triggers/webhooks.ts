// The webhook API's shapes and the pure helpers of the Triggers panel (no React, no DOM).
import type { Delivery } from "../../api/types";

/** One row of the mapping editor: run input field <- JSON pointer or ``header:Name``. */
export interface MappingRow {
  field: string;
  source: string;
}

/** The API's mapping object from the editor's rows (blank rows dropped). */
export function mappingFromRows(rows: MappingRow[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const row of rows) if (row.field.trim()) out[row.field.trim()] = row.source.trim();
  return out;
}

/** The editor's rows from the API's mapping object. */
export function rowsFromMapping(mapping: Record<string, string>): MappingRow[] {
  return Object.entries(mapping).map(([field, source]) => ({ field, source }));
}

/**
 * The server's field errors split for a form: ``byField`` under the form's own field names
 * (``name``, ``version``, ``signed``, ``enabled``, ``input_mapping`` and each mapping row's
 * ``input_mapping.<field>``), and ``rest`` as lines for the rest (``run_as``: the form has no
 * such field, so its message must still be shown).
 */
export function splitFieldErrors(fields: Record<string, string[]>, known: readonly string[]): { byField: Record<string, string>; rest: string[] } {
  const byField: Record<string, string> = {};
  const rest: string[] = [];
  for (const [path, messages] of Object.entries(fields)) {
    const text = messages.join(" ");
    if (known.includes(path) || path.startsWith("input_mapping.")) byField[path] = text;
    else rest.push(`${path}: ${text}`);
  }
  return { byField, rest };
}

/** Whole seconds from ``now`` until ``iso`` (0 once past). */
export function secondsLeft(iso: string | null, now: number = Date.now()): number {
  if (!iso) return 0;
  return Math.max(0, Math.ceil((new Date(iso).getTime() - now) / 1000));
}

/** ``m:ss`` of a count of seconds. */
export function clock(seconds: number): string {
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

/** A delivery's outcome in words: the run it started, or why it was refused. */
export function deliveryOutcome(d: Delivery): string {
  if (d.run !== null) return d.replayed ? `run #${d.run} (repeated delivery id)` : `run #${d.run}`;
  if (d.error) return d.error.message || d.error.code || "refused";
  if (d.payload !== null) return "captured by a listen (no run: the webhook is disabled)";
  return "no run";
}

/** The input properties of the draft's input schema, offered as mapping targets. */
export function inputFields(schema: Record<string, unknown> | undefined): string[] {
  const props = schema?.properties;
  return props && typeof props === "object" ? Object.keys(props as Record<string, unknown>) : [];
}

/** What went wrong, in one line: an error's message, else the value as text. */
export function failureText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** How often (ms) the Triggers panel asks whether a listen caught a delivery, and refreshes an open delivery list. */
export const POLL_MS = 1000;
