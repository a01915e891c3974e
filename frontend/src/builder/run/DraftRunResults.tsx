// The builder's draft-run drawer: a draft run's status, each step's status and the final output, live, under the canvas.
import type { RunDetail, RunStep } from "../../api/types";
import { useEffect } from "react";
import { sharedStream, type RunEventStream } from "../../lib/liveEvents";
import { useConnection, useRunEvents } from "../../lib/useLiveEvents";
import { useLeaseWatch } from "../../lib/useLeaseWatch";
import { JsonBlock, errorText } from "../../runs/JsonBlock";
import { formatDuration, formatUsd, runDisplayStatus, stepDisplayStatus } from "../../shell/format";
import { LiveStatus, StatusBadge } from "../../shell/ui";
import { useApi } from "../../shell/useApi";
import { Button } from "../../shell/Button";

const LIVE_STATUSES = ["queued", "running", "waiting"];

/** The run's top-level steps in the order they were created (an agent's model turns and tool calls are its children). */
export function topSteps(run: Pick<RunDetail, "steps">): RunStep[] {
  return (run.steps ?? []).filter((s) => s.parent === null).sort((a, b) => a.id - b.id);
}

/**
 * A draft run followed live: the run is read again on each committed event (the run
 * page's WebSocket stream, backlog first) and when a running step's lease runs out. Shows
 * its status, each step (clicking one selects its node on the canvas), the output or the
 * error, and a link to the run's page. ``onRun`` hears every fresh read (the builder keeps
 * each node's last input and output from it).
 */
export function DraftRunResults({ runId, onClose, onSelectNode, onRun, stream = sharedStream() }: {
  runId: number;
  onClose(): void;
  onSelectNode?(nodeId: string): void;
  onRun?(run: RunDetail): void;
  /** The live event stream (the page's shared one; a fake in unit tests). */
  stream?: RunEventStream;
}) {
  const { data: run, error, reload } = useApi<RunDetail>(`runs/${runId}/`);
  useRunEvents(runId, reload, 150, stream);
  useLeaseWatch(run?.steps, reload);
  const connection = useConnection(stream);
  useEffect(() => { if (run) onRun?.(run); }, [run, onRun]);
  const live = run ? LIVE_STATUSES.includes(run.status) : true;
  return (
    <section className="draft-run" aria-label="Draft run">
      <header className="draft-run__head">
        <h2 className="draft-run__title">Draft run #{runId}</h2>
        {run && <StatusBadge status={runDisplayStatus(run)} />}
        {run && live && <LiveStatus connection={connection} />}
        {run && !live && (
          <span className="muted draft-run__facts">
            {formatDuration(run.started_at ?? run.created_at, run.finished_at)} · {formatUsd(run.cost_usd)}
            {run.input_tokens + run.output_tokens > 0 ? ` · ${run.input_tokens + run.output_tokens} tokens` : ""}
          </span>
        )}
        <span className="builder__spacer" />
        <a href={`/runs/${runId}/`} target="_blank" rel="noreferrer">Open run page</a>
        <Button variant="ghost" icon aria-label="Close the draft run" title="Close" onClick={onClose}>×</Button>
      </header>
      {error && !run && <p role="alert" className="alert">Could not load run {runId}: {error.message}</p>}
      {!run && !error && <p className="muted" role="status">Starting…</p>}
      {run && (
        <div className="draft-run__body">
          <ol className="draft-run__steps" aria-label="Steps">
            {topSteps(run).map((s) => (
              <li key={s.id}>
                <button type="button" className="draft-run__step" data-node={s.node_id} title={`Select ${s.node_id} on the canvas`}
                  onClick={() => onSelectNode?.(s.node_id)}>
                  <span className="mono">{s.node_id}</span>
                  <StatusBadge status={stepDisplayStatus(s)} />
                  <span className="muted">{s.finished_at ? formatDuration(s.started_at, s.finished_at) : ""}</span>
                </button>
              </li>
            ))}
          </ol>
          <div className="draft-run__result">
            {run.status === "failed" || run.status === "cancelled" ? (
              <>
                <h3>Error</h3>
                <p className="panel-error" role="alert">{errorText(run.error) || `The run ${run.status}.`}</p>
              </>
            ) : (
              <>
                <h3>Output</h3>
                {live ? <p className="muted" role="status">Running…</p> : <JsonBlock value={run.output} label="Draft run output" />}
              </>
            )}
          </div>
        </div>
      )}
    </section>
  );
}
