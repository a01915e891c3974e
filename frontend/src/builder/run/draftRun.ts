// Running the builder's draft without publishing: the API call, whether the run needs an input form, and the draft-run note.
import type { RunDetail } from "../../api/types";
import { api } from "../../lib/api";
import type { GraphSpec } from "../spec";

/**
 * POST /api/v1/graphs/<id>/draft/run/ ``{input}``: the server runs the SAVED draft (flush
 * autosave first) as a test run and answers with the queued run. Rejects with an ApiError:
 * 400 ``graph_invalid`` (``issues``) or ``input_invalid`` (``fields`` under ``input.<path>``).
 */
export function startDraftRun(graphId: number, input: Record<string, unknown>): Promise<RunDetail> {
  return api<RunDetail>(`graphs/${graphId}/draft/run/`, { method: "POST", body: { input } });
}

/**
 * Whether running ``spec`` asks for an input first: its input schema names fields (a
 * required one, or any property to fill in). A graph with no input fields runs at once
 * with ``{}`` (or the pinned test input), as n8n's and Dify's Run do.
 */
export function draftNeedsInput(spec: Pick<GraphSpec, "input_schema">): boolean {
  const schema = spec.input_schema as { properties?: Record<string, unknown>; required?: unknown[] } | undefined;
  if (!schema) return false;
  return Object.keys(schema.properties ?? {}).length > 0 || (Array.isArray(schema.required) && schema.required.length > 0);
}

/** Why "Run draft" is disabled (null: it is not): the draft must be valid, as a publish needs. */
export function draftRunBlocked(problems: number | null): string | null {
  if (problems === null) return "Checking the graph…";
  if (problems > 0) return `Fix ${problems} problem${problems > 1 ? "s" : ""} before running the draft`;
  return null;
}
