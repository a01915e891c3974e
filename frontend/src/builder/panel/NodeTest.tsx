// "Test node": run one node with a given state through the server (a one-step test run) and show what it did.
import { useState } from "react";
import { api, ApiError } from "../../lib/api";
import { JsonValueEditor } from "../editors/widgets";
import type { GraphSpec, NodeSpec } from "../spec";
import { formatTokens, formatUsd } from "../../shell/format";
import { displayValue } from "./format";

/** POST /api/v1/graphs/<id>/nodes/<node_id>/test/ answer. */
export interface NodeTestResult {
  run_id: number | null;
  status: string;
  output: unknown;
  /** What the node wrote to the state. */
  updates?: Record<string, unknown> | null;
  error: { code?: string; message?: string } | string | null;
  usage: { input_tokens?: number; output_tokens?: number; [k: string]: unknown } | null;
  cost_usd: string | number | null;
}

/**
 * A state to start from: every declared state key at its default and every input property
 * (input properties become state keys) at its default or null, so the user only fills values in.
 */
export function initialTestState(spec: GraphSpec): Record<string, unknown> {
  const state: Record<string, unknown> = {};
  const props = spec.input_schema?.properties;
  if (props && typeof props === "object") {
    for (const [key, s] of Object.entries(props as Record<string, { default?: unknown }>)) state[key] = s?.default ?? null;
  }
  for (const [key, s] of Object.entries(spec.state ?? {})) state[key] = s.default ?? state[key] ?? null;
  return state;
}

function errorText(error: NodeTestResult["error"]): string | null {
  if (error === null || error === undefined) return null;
  if (typeof error === "string") return error;
  return [error.code, error.message].filter(Boolean).join(": ") || JSON.stringify(error);
}

interface Props {
  graphId: number;
  node: NodeSpec;
  spec: GraphSpec;
}

type Phase =
  | { kind: "idle" }
  | { kind: "running" }
  | { kind: "confirm"; message: string; effects: string[] }
  | { kind: "done"; result: NodeTestResult }
  | { kind: "failed"; message: string };

/**
 * The test form and its result. The server tests ``node`` as the editor holds it (unsaved
 * edits included), checked as the saved node would be, in the saved draft's context.
 */
export function NodeTest({ graphId, node, spec }: Props) {
  const [open, setOpen] = useState(false);
  const [state, setState] = useState<unknown>(() => initialTestState(spec));
  const [phase, setPhase] = useState<Phase>({ kind: "idle" });
  const stateOk = state !== null && typeof state === "object" && !Array.isArray(state);

  async function run(confirm: boolean) {
    setPhase({ kind: "running" });
    try {
      const result = await api<NodeTestResult>(`graphs/${graphId}/nodes/${encodeURIComponent(node.id)}/test/`, {
        method: "POST",
        // The node as the editor holds it: the user tests what they see, saved or not.
        body: { state, node, confirm },
      });
      setPhase({ kind: "done", result });
    } catch (err) {
      if (err instanceof ApiError && (err.status === 428 || err.status === 409) && err.code === "confirmation_required") {
        const effects = (err.body?.error as { effects?: unknown } | undefined)?.effects;
        setPhase({ kind: "confirm", message: err.message, effects: Array.isArray(effects) ? effects.map(String) : [] });
      } else {
        setPhase({ kind: "failed", message: err instanceof Error ? err.message : String(err) });
      }
    }
  }

  if (!open) {
    return (
      <section className="panel-section" aria-label="Test node">
        <button type="button" className="btn" onClick={() => setOpen(true)}>
          Test node
        </button>
        <p className="field-help">Run this node once with a state you give, through its real kind and provider.</p>
      </section>
    );
  }

  const result = phase.kind === "done" ? phase.result : null;
  const err = result ? errorText(result.error) : null;
  return (
    <section className="panel-section node-test" aria-label="Test node">
      <h3>Test node</h3>
      <div className="form-field">
        <label htmlFor={`test-state-${node.id}`}>State (JSON object)</label>
        <p className="field-help">The state the node sees. The test runs the node as shown here, unsaved changes included; the test run is recorded with its cost.</p>
        <JsonValueEditor id={`test-state-${node.id}`} value={state} onChange={setState} label="Test state" />
        {!stateOk && <p className="field-errors">The state must be a JSON object.</p>}
      </div>
      <div className="button-row">
        <button type="button" className="btn btn-primary" disabled={!stateOk || phase.kind === "running"} onClick={() => void run(false)}>
          {phase.kind === "running" ? "Running…" : "Run test"}
        </button>
        <button type="button" className="btn" onClick={() => setOpen(false)}>
          Close
        </button>
      </div>
      {phase.kind === "confirm" && (
        <div className="confirm-box" role="alertdialog" aria-labelledby={`confirm-${node.id}`}>
          <p id={`confirm-${node.id}`}>
            <strong>This node is not safe to repeat.</strong> Testing it really performs its action (for example, sends the
            email or the request). {phase.message}
          </p>
          {phase.effects.length > 0 && (
            <ul>
              {phase.effects.map((e, i) => (
                <li key={i}>{e}</li>
              ))}
            </ul>
          )}
          <div className="button-row">
            <button type="button" className="btn btn-danger" onClick={() => void run(true)}>
              Run it anyway
            </button>
            <button type="button" className="btn" onClick={() => setPhase({ kind: "idle" })}>
              Cancel
            </button>
          </div>
        </div>
      )}
      {phase.kind === "failed" && (
        <p className="panel-error" role="alert">
          Test failed to start: {phase.message}
        </p>
      )}
      {result && (
        <div className="test-result" aria-live="polite">
          <dl className="readonly-values">
            <div className="readonly-row">
              <dt>Status</dt>
              <dd className={`status status-${result.status}`}>{result.status}</dd>
            </div>
            <div className="readonly-row">
              <dt>Cost</dt>
              <dd>{formatUsd(result.cost_usd)}</dd>
            </div>
            <div className="readonly-row">
              <dt>Usage</dt>
              <dd>
                {result.usage
                  ? `${formatTokens(result.usage.input_tokens ?? 0)} in · ${formatTokens(result.usage.output_tokens ?? 0)} out`
                  : "—"}
              </dd>
            </div>
            {result.run_id !== null && (
              <div className="readonly-row">
                <dt>Test run</dt>
                <dd>
                  <a href={`/runs/${result.run_id}/`}>#{result.run_id}</a>
                </dd>
              </div>
            )}
          </dl>
          {err && (
            <p className="panel-error" role="alert">
              {err}
            </p>
          )}
          <h4>Output</h4>
          <pre className="test-output">{displayValue(result.output)}</pre>
          {result.updates && Object.keys(result.updates).length > 0 && (
            <>
              <h4>Written to the state</h4>
              <pre className="test-output">{displayValue(result.updates)}</pre>
            </>
          )}
        </div>
      )}
    </section>
  );
}
