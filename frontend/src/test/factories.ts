// Whole API answers for unit tests, typed from the generated schema: each factory fills every field
// with a plain default and takes the fields a test cares about.
import type { AttemptSpan, CompareSide, GraphSummary, PreRunEstimate, RunDetail, RunStep, StepSummary, ValidationIssue, ValidationResult } from "../api/types";

const T = "2026-12-01T10:00:00Z";

export function graphSummary(over: Partial<GraphSummary> = {}): GraphSummary {
  return {
    id: 1, name: "graph", description: "", latest_version: null, created_by: null, created_at: T, updated_at: T,
    run_count: 0, deletable: true, retention_days: null, max_concurrent_runs: null, concurrency_key: "", concurrency_key_limit: 1, ...over,
  };
}

export function stepSummary(over: Partial<StepSummary> = {}): StepSummary {
  return {
    id: 1, run: 1, parent: null, node_id: "node", kind: "transform", iteration: 0, status: "pending", attempt: 0, max_attempts: 1,
    lease_owner: "", lease_expires_at: null, worker_alive: null, output: null, updates: null, error: null, usage: null,
    cost_usd: null, created_at: T, started_at: null, finished_at: null, ...over,
  };
}

export function attemptSpan(over: Partial<AttemptSpan> = {}): AttemptSpan {
  return { number: 1, status: "succeeded", started_at: T, finished_at: null, error_code: null, retry_at: null, ...over };
}

export function runStep(over: Partial<RunStep> = {}): RunStep {
  return { ...stepSummary(), attempts: [], ...over };
}

export function runDetail(over: Partial<RunDetail> = {}): RunDetail {
  return {
    id: 1, uuid: "00000000-0000-0000-0000-000000000001", graph: 1, graph_name: "graph", version: 1, status: "queued", source: "",
    waiting_for: null, queue: null, interrupted: false, event_seq: 0, error: null, step_count: 0, input_tokens: 0, output_tokens: 0, cost_usd: "0",
    budget_usd: null, budget_tokens: null, is_test: false, forked_from: null, forked_from_step: null, created_by: null, started_from: null,
    created_at: T, started_at: null, finished_at: null, input: {}, state: {}, output: null, steps: [], tested_node: null, fork_origin: null, traceparent: "",
    parent: null, children: [], totals: { cost_usd: "0", input_tokens: 0, output_tokens: 0 },
    ...over,
  };
}

export function compareSide(over: Partial<CompareSide> = {}): CompareSide {
  return {
    steps: 1, attempts: 1, seconds: null, step: 1, status: "succeeded", output: null, updates: null, error: null, cost_usd: null, ...over,
  };
}

/** A validation issue as the server words one (``node`` and ``field`` given, the rest filled). */
export function issue(over: Partial<ValidationIssue> & Pick<ValidationIssue, "code" | "message">): ValidationIssue {
  return { node: null, node_id: null, field: "", path: "", ...over };
}

/** A validation answer: valid, nothing found, unless ``over`` says otherwise. */
export function validation(over: Partial<ValidationResult> = {}): ValidationResult {
  return { valid: true, errors: [], warnings: [], handles: {}, estimate: null, content_hash: null, ...over };
}

/** A pre-run estimate: per node ``{usd, tokens}`` and the costliest path through ``path`` (nothing unpriced, no loop). */
export function estimate(nodes: Record<string, { usd: string | null; tokens: number }>, path: { nodes: string[]; usd: string; tokens: number }): PreRunEstimate {
  return {
    nodes: Object.fromEntries(Object.entries(nodes).map(([id, n]) => [id, { kind: "llm", model: null, ...n }])),
    costliest_path: { unpriced: [], loops: [], ...path },
  };
}
