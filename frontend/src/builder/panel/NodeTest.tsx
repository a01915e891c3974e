// "Test node": run one node with a given state through the server (a one-step test run) and show what it did.
import type { NodeTestResult } from "../../api/types";
import { useState, type ReactNode } from "react";
import { api, ApiError } from "../../lib/api";
import { JsonValueEditor } from "../editors/JsonValueEditor";
import type { GraphSpec, NodeSpec } from "../spec";
import { formatTokens, formatUsd } from "../../shell/format";
import { displayValue } from "./format";
import { recordNodeData } from "../run/lastData";
import { Button } from "../../shell/Button";

type KindSchemas = readonly { kind: string; config_schema: Record<string, unknown> }[];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Every node that can run before ``nodeId`` (follows edges backwards; not the node itself). */
export function upstreamNodes(spec: GraphSpec, nodeId: string): string[] {
  const seen = new Set<string>();
  const todo = [nodeId];
  while (todo.length > 0) {
    const at = todo.pop()!;
    for (const e of spec.edges) {
      if (e.target === at && e.source !== nodeId && !seen.has(e.source)) {
        seen.add(e.source);
        todo.push(e.source);
      }
    }
  }
  return spec.nodes.map((n) => n.id).filter((id) => seen.has(id));
}

/**
 * The keys a node writes, each with an empty value of the shape it will have where that is
 * known: an LLM's or agent's reply is text ("") unless it has an output schema (an object, {}),
 * other values (a tool's result, a transform's expressions) are null. The output key defaults
 * to the kind's (``output_key`` default in ``catalogue``, e.g. llm: "reply").
 */
export function writtenKeys(node: GraphSpec["nodes"][number], catalogue: KindSchemas): [string, unknown][] {
  const config: Record<string, unknown> = node.config ?? {};
  const out: [string, unknown][] = [];
  const props = catalogue.find((k) => k.kind === node.kind)?.config_schema.properties;
  const fallback = isObject(props) && isObject(props.output_key) ? props.output_key.default : undefined;
  const key = "output_key" in config ? config.output_key : fallback;
  if (typeof key === "string" && key) {
    const text = node.kind === "llm" || node.kind === "agent";
    out.push([key, text ? (isObject(config.output_schema) ? {} : "") : null]);
  }
  if (node.kind === "transform" && isObject(config.set)) for (const k of Object.keys(config.set)) out.push([k, null]);
  return out;
}

/**
 * A state to start from: every input property (they become state keys) at its default or
 * null, every declared state key at its default, and, given ``nodeId``, every key a node
 * before it writes (``writtenKeys``), so the user sees every name the node may read and only
 * fills values in.
 */
export function initialTestState(spec: GraphSpec, nodeId?: string, catalogue: KindSchemas = []): Record<string, unknown> {
  const state: Record<string, unknown> = {};
  const props = spec.input_schema?.properties;
  if (props && typeof props === "object") {
    for (const [key, s] of Object.entries(props as Record<string, { default?: unknown }>)) state[key] = s?.default ?? null;
  }
  for (const [key, s] of Object.entries(spec.state ?? {})) state[key] = s.default ?? state[key] ?? null;
  if (nodeId !== undefined) {
    for (const id of upstreamNodes(spec, nodeId)) {
      const upstream = spec.nodes.find((n) => n.id === id);
      if (!upstream) continue;
      for (const [key, value] of writtenKeys(upstream, catalogue)) if (!(key in state)) state[key] = value;
    }
  }
  return state;
}

function errorText(error: NodeTestResult["error"]): string | null {
  if (error === null || error === undefined) return null;
  if (typeof error === "string") return error;
  // The message says what went wrong in words; the code is for the run page and logs.
  return error.message || error.code || JSON.stringify(error);
}

interface Props {
  graphId: number;
  node: NodeSpec;
  spec: GraphSpec;
  /** The node-kind catalogue (kinds' default output keys). */
  catalogue?: KindSchemas;
  /** Shown under the section while it holds no result of its own (the node's last run). */
  children?: ReactNode;
  /** The node's pinned test data: the state the test starts from (else ``initialTestState``). */
  pinned?: Record<string, unknown>;
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
export function NodeTest({ graphId, node, spec, catalogue = [], children, pinned }: Props) {
  const [open, setOpen] = useState(false);
  const [state, setState] = useState<unknown>(() => pinned ?? initialTestState(spec, node.id, catalogue));
  // A pin made or changed while the form is closed is what the next test starts from.
  const [seenPin, setSeenPin] = useState(pinned);
  if (seenPin !== pinned) {
    setSeenPin(pinned);
    if (!open && pinned) setState(pinned);
  }
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
      // The panel's "Last run" shows what the node got and gave; a draft run replaces it later.
      if (result.run_id !== null) recordNodeData(graphId, node.id, { source: "test", runId: result.run_id, stepId: null, status: result.status, input: state, output: result.output });
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
      <>
        <section className="panel-section" aria-label="Test node">
          <Button onClick={() => setOpen(true)}>
            Test node
          </Button>
          <p className="field-help">Run this node once with a state you give, through its real kind and provider.</p>
        </section>
        {children}
      </>
    );
  }

  const result = phase.kind === "done" ? phase.result : null;
  const err = result ? errorText(result.error) : null;
  return (
    <>
      <section className="panel-section node-test" aria-label="Test node">
        <h3>Test node</h3>
        <div className="button-row">
          <Button variant="primary" disabled={!stateOk || phase.kind === "running"} onClick={() => void run(false)}>
            {phase.kind === "running" ? "Running…" : "Run test"}
          </Button>
          <Button onClick={() => setOpen(false)}>
            Close
          </Button>
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
              <Button variant="danger" onClick={() => void run(true)}>
                Run it anyway
              </Button>
              <Button onClick={() => setPhase({ kind: "idle" })}>
                Cancel
              </Button>
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
            {result.updates !== null && typeof result.updates === "object" && Object.keys(result.updates).length > 0 && (
              <>
                <h4>Written to the state</h4>
                <pre className="test-output">{displayValue(result.updates)}</pre>
              </>
            )}
          </div>
        )}
        {/* The state to test with comes after the buttons and the result: the panel is narrow, and
            a long state must not push the result below the fold (the section sits at the panel's top). */}
        <div className="form-field">
          <label htmlFor={`test-state-${node.id}`}>State (JSON object)</label>
          <p className="field-help">{pinned ? "Starts from the pinned test data. " : ""}The state the node sees: the run input, declared keys and what earlier nodes write, to fill in. The test runs the node as shown here, unsaved changes included; the test run is recorded with its cost.</p>
          <JsonValueEditor id={`test-state-${node.id}`} value={state} onChange={setState} label="Test state" />
          {!stateOk && <p className="field-errors">The state must be a JSON object.</p>}
        </div>
      </section>
      {/* This test's own result shows the output; the last run (maybe a draft run's step) otherwise. */}
      {result ? null : children}
    </>
  );
}
