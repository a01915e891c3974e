// Beside a node's form: what it got and gave the last time it ran from the builder (a draft run's step or a node test).
import type { StepStateAnswer } from "../../api/types";
import { useApi } from "../../shell/useApi";
import { useNodeData } from "../run/lastData";
import { displayValue } from "./format";

/**
 * The node's last input and output in this browser session, with where they come from (a
 * link to that run). A draft run's step input is read from the step's state view (the state
 * as committed when it started; the run's step list carries outputs only); a node test
 * carries both. Nothing when the node has not
 * run from the builder yet.
 */
export function NodeLastData({ graphId, nodeId }: { graphId: number | null; nodeId: string }) {
  const data = useNodeData(graphId, nodeId);
  const needsStep = data !== undefined && data.input === undefined && data.stepId !== null;
  const { data: step, error } = useApi<StepStateAnswer>(needsStep ? `steps/${data.stepId}/state/` : null);
  if (!data) return null;
  const input = data.input !== undefined ? data.input : step?.input_state;
  const what = data.source === "draft" ? "Draft run" : "Node test";
  return (
    <section className="panel-section node-last-data" aria-label="Last run of this node">
      <h3>Last run</h3>
      <p className="field-help">
        {what} <a href={`/runs/${data.runId}/`} target="_blank" rel="noreferrer">#{data.runId}</a> ·{" "}
        <span className={`status status-${data.status}`}>{data.status}</span>
      </p>
      <div className="node-last-data__pair">
        <div>
          <h4>Input</h4>
          {input === undefined
            ? <p className="muted">{error ? `Could not load it: ${error.message}` : "Loading…"}</p>
            : <pre className="test-output" aria-label="Last input">{displayValue(input)}</pre>}
        </div>
        <div>
          <h4>{data.status === "succeeded" ? "Output" : "Error"}</h4>
          <pre className="test-output" aria-label="Last output">{displayValue(data.output)}</pre>
        </div>
      </div>
    </section>
  );
}
