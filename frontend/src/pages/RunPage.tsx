// /runs/<id>/: one run live: its graph coloured by node state, a timeline, a step inspector, input and output, steps and the event log.
import type { RunDetail, RunEvent, RunStep } from "../api/types";
import { Suspense, lazy, useCallback, useMemo, useRef, useState } from "react";
import { useLeaseWatch } from "../lib/useLeaseWatch";
import { useConnection, useRunEvents } from "../lib/useLiveEvents";
import { retryAdvice } from "../runs/actions";
import { RunActions } from "../runs/RunActions";
import { JsonBlock, errorText } from "../runs/JsonBlock";
import { StepInspector } from "../runs/StepInspector";
import { DecideLink, WaitingApprovals, useRunApprovals } from "../runs/ApprovalLinks";
import { Timeline } from "../runs/Timeline";
import { nodeMarks, stepsShown } from "../runs/runView";
import { RUN_STATE_LABELS } from "../builder/runStateColours";
import { statusClass } from "../lib/statusTokens";
import { formatDuration, formatUsd, queueReason, runDisplayStatus, startedBy, stepDisplayStatus } from "../shell/format";
import { graphUrl, runUrl } from "../shell/graphLinks";
import { EmptyState, ErrorMessage, LiveStatus, PageHeader, Skeleton, StatusBadge, When } from "../shell/ui";
import { useApi } from "../shell/useApi";
import "../runs/runPage.css";
import { Button, ButtonLink } from "../shell/Button";

// The canvas (React Flow and the builder's node cards) is its own chunk: the run's facts and
// events show before it has downloaded.
const RunGraph = lazy(() => import("../runs/RunGraph"));

/** The node an engine error names (``node_id``), if any. */
function failedAt(error: unknown): string | null {
  const id = error && typeof error === "object" ? (error as { node_id?: unknown }).node_id : undefined;
  return typeof id === "string" ? id : null;
}

/** What an event is about, in a few words (its node, reason or error). */
function eventDetail(e: RunEvent): string {
  const d = e.data ?? {};
  const parts: string[] = [];
  if (typeof d.node_id === "string") parts.push(d.node_id);
  if (typeof d.attempt === "number" && d.attempt > 1) parts.push(`attempt ${d.attempt}`);
  if (typeof d.reason === "string") parts.push(d.reason);
  if (typeof d.by === "string") parts.push(`by ${d.by}`);
  if (d.error) parts.push(errorText(d.error));
  return parts.join(" · ");
}

/** The run's events as they commit (each once, in seq order), each at its time to the ms and its offset from ``origin`` (the run's start). */
export function EventLog({ events, connection, origin }: { events: RunEvent[]; connection: string; origin?: string | null }) {
  return (
    <section className="card" aria-labelledby="run-events">
      <h2 id="run-events">Events <LiveStatus connection={connection} /></h2>
      {events.length === 0 ? <p className="muted">No events yet.</p> : (
        <div className="table-wrap event-log">
          <table className="table table-compact" aria-label="Run events">
            <thead><tr><th scope="col" className="num">#</th><th scope="col">Time</th><th scope="col">Event</th><th scope="col">Detail</th></tr></thead>
            <tbody>
              {events.map((e) => (
                <tr key={e.seq} data-seq={e.seq}>
                  <td className="num">{e.seq}</td>
                  <td><When at={e.created_at} origin={origin} short /></td>
                  <td><code>{e.kind}</code></td>
                  <td>{eventDetail(e)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

const LEGEND: [string, string][] = [
  ["pending", RUN_STATE_LABELS.pending], ["running", "running"], ["retrying", "waiting to retry"], ["waiting", "at an approval gate"],
  ["parked", "parked for a decision"], ["interrupted", "worker stopped"], ["succeeded", "succeeded"], ["failed", "failed"], ["skipped", RUN_STATE_LABELS.skipped],
];

/** The legend's entries: a fork adds its kept nodes ("kept from run #N"). */
export function runLegend(run: Pick<RunDetail, "fork_origin">): [string, string][] {
  return run.fork_origin ? [...LEGEND, ["kept", `kept from run #${run.fork_origin.run}`]] : LEGEND;
}

/**
 * What run ``run`` ran, in the header's words: a node-test run is a test of one node from
 * the builder (its version is a hidden snapshot numbered 0, not a published version);
 * any other run ran version N, and "Open graph" opens that version read-only.
 */
export function ranWhat(run: Pick<RunDetail, "is_test" | "tested_node" | "graph" | "version">): { test: boolean; graphHref: string; graphLabel: string } {
  if (run.is_test) return { test: true, graphHref: graphUrl(run.graph), graphLabel: "Open graph in the builder" };
  return { test: false, graphHref: `${graphUrl(run.graph)}?version=${run.version}`, graphLabel: "Open graph" };
}

/** The step a node click opens: the node's latest top-level step (the last loop iteration). */
function latestStepOf(steps: readonly RunStep[], nodeId: string): RunStep | undefined {
  let best: RunStep | undefined;
  for (const s of steps) if (s.parent === null && s.node_id === nodeId && (!best || s.iteration > best.iteration || s.id > best.id)) best = s;
  return best;
}

/** What changes when a step moves on (its status, attempt, or its children's), so the inspector reloads then. */
function stepRevision(steps: readonly RunStep[], id: number): string {
  const s = steps.find((x) => x.id === id);
  if (!s) return "";
  const kids = steps.filter((x) => x.parent === id);
  return `${s.status}:${s.attempt}:${kids.length}:${kids.filter((k) => k.finished_at).length}`;
}

/** ``?step=<id>`` in the address: a link opens the run with that step inspected. */
function stepParam(): number | null {
  const v = new URLSearchParams(window.location.search).get("step");
  return v && /^\d+$/.test(v) ? Number(v) : null;
}

export default function RunPage({ runId }: { runId?: unknown }) {
  const id = Number(runId);
  const { data: run, error, loading, reload } = useApi<RunDetail>(Number.isInteger(id) ? `runs/${id}/` : null);
  // Every committed event reloads the run (debounced): node states, the timeline and the
  // statuses change without a reload of the page.
  const events = useRunEvents(Number.isInteger(id) ? id : null, reload);
  const connection = useConnection();
  // A dead worker commits no event: read the run again when a running step's lease runs out.
  useLeaseWatch(run?.steps, reload);
  const [inspected, setInspected] = useState<{ step: number | null; node: string | null }>(() => ({ step: stepParam(), node: null }));
  // A node-test run's page shows the tested node's steps, not its harness's end step.
  const testedNode = run?.is_test ? run.tested_node ?? null : null;
  const allSteps = run?.steps;
  const steps = useMemo(() => stepsShown((allSteps ?? []) as RunStep[], testedNode) as RunStep[], [allSteps, testedNode]);
  const nodeIds = useMemo(() => [...new Set(steps.filter((s) => s.parent === null).map((s) => s.node_id))], [steps]);
  const [graphNodes, setGraphNodes] = useState<string[] | null>(null);
  // The inspector's "Fork from this step" opens the header's fork dialog on that step.
  const [forkStep, setForkStep] = useState<number | null>(null);
  const [canFork, setCanFork] = useState(false);
  const [canRetry, setCanRetry] = useState(false);
  const closeFork = useCallback(() => setForkStep(null), []);
  const origin = run?.fork_origin ?? null;
  // A new run object each reload, as the steps are: the marks are worked out again then anyway.
  const kept = useMemo(() => (origin ? { run: origin.run, nodes: origin.kept_nodes } : null), [origin]);
  const marks = useMemo(() => nodeMarks(graphNodes ?? nodeIds, steps, run?.status ?? "queued", kept), [graphNodes, nodeIds, steps, run?.status, kept]);
  const inspect = useCallback((step: number | null, node: string | null) => {
    setInspected({ step, node });
    const url = new URL(window.location.href);
    if (step === null) url.searchParams.delete("step"); else url.searchParams.set("step", String(step));
    window.history.replaceState(window.history.state, "", url);
  }, []);
  // A run waiting at a gate or for a decision: its pending requests, each a link to decide it.
  const approvals = useRunApprovals(id, run?.status === "waiting" || !!run?.waiting_for, run?.event_seq ?? 0);
  const stepsRef = useRef(steps);
  stepsRef.current = steps;
  const openNode = useCallback((nodeId: string) => {
    const s = latestStepOf(stepsRef.current, nodeId);
    inspect(s ? s.id : null, nodeId);
  }, [stepsRef, inspect]);
  // A failed live reload keeps the run on screen (the next event or Refresh tries again).
  if (error && !run) return <main className="page"><ErrorMessage error={error} title={`Run ${id} could not be loaded.`} onRetry={reload} /></main>;
  if (!run || (loading && !run)) return <main className="page"><Skeleton lines={8} variant="page" label="Loading the run…" /></main>;
  const tokens = run.input_tokens + run.output_tokens;
  // Runs this run called (subgraph steps): their spend is rolled up into the totals; a direct child links from its step.
  const childCost = run.children.reduce((sum, c) => sum + Number(c.cost_usd), 0).toFixed(6);
  const childOfStep = new Map(run.children.filter((c) => c.parent_run === run.id).map((c) => [c.step, c]));
  // The origin of every "+1.250 s" on the page: when the run started (created, before its first claim).
  const runStart = run.started_at ?? run.created_at;
  const live = ["queued", "running", "waiting"].includes(run.status);
  const inspectedStep = inspected.step !== null ? steps.find((s) => s.id === inspected.step) : undefined;
  const ran = ranWhat(run);
  const tested = run.is_test ? run.tested_node ?? null : null;
  const selectedNode = inspectedStep ? (inspectedStep.parent === null ? inspectedStep.node_id : steps.find((s) => s.id === inspectedStep.parent)?.node_id ?? null) : inspected.node;
  return (
    <main className="page page--run">
      <nav className="breadcrumbs" aria-label="Breadcrumbs"><a href="/runs/">Runs</a> <span aria-hidden="true">/</span> {run.is_test ? "Test run" : "Run"} #{run.id}</nav>
      <PageHeader
        title={<>{ran.test ? "Test run" : "Run"} #{run.id} <StatusBadge status={runDisplayStatus(run)} /></>}
        subtitle={ran.test
          ? <span className="run-origin">{tested ? <>A test of node <code>{tested}</code> of graph </> : "A run of the draft of graph "}<a href={graphUrl(run.graph)}>{run.graph_name}</a>, run from the builder: not a published version of the graph.</span>
          : <>
            Graph <a href={graphUrl(run.graph)}>{run.graph_name}</a>, version {run.version}
            {run.parent ? <span className="run-origin run-parent"> · Called by <a href={`${runUrl(run.parent.run)}?step=${run.parent.step}`}>run #{run.parent.run}</a> (graph {run.parent.graph_name}, step <code>{run.parent.node_id}</code>)</span> : null}
            {origin ? <span className="run-origin"> · Forked from <a href={`${runUrl(origin.run)}?step=${origin.step}`}>run #{origin.run}</a> (at <code>{origin.node_id}</code>)</span>
              : run.forked_from ? <span className="run-origin"> · Forked from <a href={runUrl(run.forked_from)}>run #{run.forked_from}</a></span> : null}
          </>}
        actions={<>
          <RunActions run={run} onChanged={reload} forkStep={forkStep} onForkClosed={closeFork} onAllowed={(a) => { setCanFork(!!a?.fork.allowed); setCanRetry(!!a?.retry.allowed); }} />
          <ButtonLink href={ran.graphHref} title={ran.test ? "The graph's draft, where the node was tested" : `Version ${run.version} read-only (the builder links back to the draft)`}>{ran.graphLabel}</ButtonLink>
          <Button onClick={reload} disabled={loading}>Refresh</Button>
        </>}
      />
      <dl className="facts card">
        <div><dt>Version</dt><dd>{ran.test
          ? <a href={graphUrl(run.graph)} title="A node test runs on a snapshot of the draft, not a published version">builder test</a>
          : <a href={`${graphUrl(run.graph)}?version=${run.version}`} title="Open this version read-only in the builder">v{run.version}</a>}</dd></div>
        <div><dt>Started by</dt><dd>{startedBy(run)}</dd></div>
        <div><dt>Started</dt><dd><When at={runStart} date ago /></dd></div>
        <div><dt>Finished</dt><dd><When at={run.finished_at} date ago /></dd></div>
        <div><dt>Duration</dt><dd>{formatDuration(run.started_at, run.finished_at)}</dd></div>
        <div><dt>Steps</dt><dd>{tested ? steps.filter((s) => s.parent === null).length : run.step_count}</dd></div>
        {run.children.length > 0 ? <>
          <div><dt>Tokens</dt><dd>{(run.totals.input_tokens + run.totals.output_tokens).toLocaleString()}</dd></div>
          <div><dt>Cost</dt><dd>{formatUsd(run.totals.cost_usd)} <span className="muted small">incl. {formatUsd(childCost)} in {run.children.length} child run{run.children.length === 1 ? "" : "s"}</span></dd></div>
        </> : <>
          <div><dt>Tokens</dt><dd>{tokens.toLocaleString()}</dd></div>
          <div><dt>Cost</dt><dd>{formatUsd(run.cost_usd)}</dd></div>
        </>}
      </dl>
      {error ? <ErrorMessage error={error} title="The run could not be refreshed; showing what was loaded last." onRetry={reload} /> : null}
      {run.interrupted ? (
        <div className="alert alert-warning" role="status"><strong>Interrupted.</strong> A running step's worker stopped heartbeating; the step is taken back and run again (or parked for a decision) once its lease runs out.</div>
      ) : null}
      {run.queue ? (
        <div className="alert alert-queued" role="status" aria-label="Queued"><strong>Queued, position {run.queue.position}.</strong> It waits in line because {queueReason(run.queue)}; it starts when a run ahead of it ends.</div>
      ) : null}
      {run.waiting_for === "decision" ? (
        <div className="alert alert-warning" role="status"><strong>Waiting for a decision.</strong> A crash interrupted a step that is not safe to repeat: an operator retries, skips or fails it.
          {approvals.filter((a) => a.purpose === "recovery").map((a) => <span key={a.id} className="waiting-approvals__link"> <DecideLink approval={a} /></span>)}</div>
      ) : null}
      <WaitingApprovals approvals={approvals} />
      {run.error ? (
        <div className="alert alert-error" role="alert">
          <div><strong>The run failed{failedAt(run.error) ? ` at ${failedAt(run.error)}` : ""}.</strong> {errorText(run.error)}</div>
          {/* Why Retry is not the highlighted action: said where the error is read. */}
          {canRetry && retryAdvice(run.error) ? <div className="small retry-advice">{retryAdvice(run.error)}</div> : null}
        </div>
      ) : null}
      <div className={`run-main${inspected.step !== null || inspected.node !== null ? " run-main--inspecting" : ""}`}>
        <section className="card run-graph" aria-labelledby="run-graph">
          <div className="run-graph__head">
            <h2 id="run-graph">Graph <span className="muted small">{ran.test ? (tested ? "the tested node alone" : "the draft as it was run") : `v${run.version}`}, read-only: click a node to inspect its step; Ctrl+scroll or the +/− buttons zoom</span></h2>
            <ul className="state-legend" aria-label="Node states">
              {runLegend(run).map(([state, words]) => <li key={state} className={`state-legend__item state-legend__item--${state} ${statusClass(state)}`}>{words}</li>)}
            </ul>
          </div>
          <div className="run-graph__canvas">
            <Suspense fallback={<Skeleton lines={6} label="Loading the canvas…" />}>
              <RunGraphWithNodes runId={run.id} testedNode={tested} marks={marks} selected={selectedNode} onOpen={openNode} onNodes={setGraphNodes} />
            </Suspense>
          </div>
        </section>
        {inspected.step !== null ? (
          <StepInspector key={inspected.step} stepId={inspected.step} revision={stepRevision(steps, inspected.step)} runStart={runStart}
            topLevel={inspectedStep ? inspectedStep.parent === null : undefined} approval={approvals.find((a) => a.step === inspected.step)} onClose={() => inspect(null, null)} onFork={canFork ? setForkStep : undefined} />
        ) : inspected.node !== null ? (
          <aside className="inspector card" aria-label="Step inspector">
            <header className="inspector__head"><h3><code>{inspected.node}</code></h3><StatusBadge status={marks[inspected.node]?.state ?? "pending"} />
              <Button size="small" className="inspector__close" icon onClick={() => inspect(null, null)} aria-label="Close the step inspector">×</Button></header>
            <p className="muted">{marks[inspected.node]?.state === "kept" && origin
              ? <>Not run in this fork: its result was kept from <a href={`${runUrl(origin.run)}?step=${origin.step}`}>run #{origin.run}</a>, which this run was forked from.</>
              : marks[inspected.node]?.state === "skipped" ? "The run ended without reaching this node (a branch it did not take)." : "This node has not run yet in this run."}</p>
          </aside>
        ) : null}
      </div>
      <section className="card" aria-labelledby="run-timeline">
        <h2 id="run-timeline">Timeline <span className="muted small">steps that overlap in time run in parallel lanes; click a bar to inspect it</span></h2>
        <Timeline steps={steps} live={live} origin={runStart} selected={inspected.step} onOpen={(s) => inspect(s.id, s.node_id)} />
      </section>
      <div className="grid-2">
        <section className="card" aria-labelledby="run-input"><h2 id="run-input">Input</h2><JsonBlock value={run.input} label="Run input" /></section>
        <section className="card" aria-labelledby="run-output">
          <h2 id="run-output">{run.error ? "Error" : "Output"}</h2>
          {run.error ? <JsonBlock value={run.error} label="Run error" /> : run.output === null || run.output === undefined
            ? <p className="muted">{run.status === "succeeded" ? "The run produced no output." : "No output yet."}</p>
            : <JsonBlock value={run.output} label="Run output" />}
        </section>
      </div>
      <section className="card" aria-labelledby="run-steps">
        <h2 id="run-steps">Steps</h2>
        {steps.length === 0 ? <EmptyState title="No steps yet">The run's steps appear here as the workers take them.</EmptyState> : (
          <div className="table-wrap">
            <table className="table">
              <thead>
                <tr>
                  <th scope="col">Node</th><th scope="col">Kind</th><th scope="col">Status</th><th scope="col">Attempts</th>
                  <th scope="col">Started</th><th scope="col">Duration</th><th scope="col" className="num">Cost</th><th scope="col">Error</th>
                </tr>
              </thead>
              <tbody>
                {steps.map((s) => (
                  <tr key={s.id} className={inspected.step === s.id ? "row-selected" : undefined}>
                    <td className={s.parent ? "indent" : undefined}>
                      <button type="button" className="linkish" onClick={() => inspect(s.id, s.node_id)} aria-label={`Inspect step ${s.node_id}`}><code>{s.node_id}</code></button>
                      {s.iteration > 0 ? <span className="muted small"> #{s.iteration + 1}</span> : null}
                      {childOfStep.has(s.id) ? <> <a className="small child-run-link" href={runUrl(childOfStep.get(s.id)!.run)}>child run #{childOfStep.get(s.id)!.run}</a></> : null}
                    </td>
                    <td>{s.kind}</td>
                    <td data-node={s.node_id}><StatusBadge status={stepDisplayStatus(s)} /></td>
                    <td>{s.attempt} / {s.max_attempts}</td>
                    <td><When at={s.started_at} origin={runStart} short /></td>
                    <td>{formatDuration(s.started_at, s.finished_at)}</td>
                    <td className="num">{formatUsd(s.cost_usd)}</td>
                    <td className="error-cell">{s.error && s.status === "succeeded"
                      ? <span className="muted" title={errorText(s.error)}>earlier attempt failed</span> : errorText(s.error)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      {run.children.length > 0 ? (
        <section className="card" aria-labelledby="run-children">
          <h2 id="run-children">Child runs <span className="muted small">graphs this run called; their cost is included in this run's</span></h2>
          <div className="table-wrap">
            <table className="table">
              <thead>
                <tr><th scope="col">Run</th><th scope="col">Graph</th><th scope="col">Called by</th><th scope="col">Status</th><th scope="col" className="num">Tokens</th><th scope="col" className="num">Cost</th></tr>
              </thead>
              <tbody>
                {run.children.map((c) => (
                  <tr key={c.run} data-child-run={c.run}>
                    <td className={c.depth > 1 ? "indent" : undefined}><a href={runUrl(c.run)}>run #{c.run}</a></td>
                    <td><a href={graphUrl(c.graph)}>{c.graph_name}</a> <span className="muted small">v{c.version}</span></td>
                    <td>{c.parent_run === run.id ? <code>{c.node_id}</code> : <>run #{c.parent_run} · <code>{c.node_id}</code></>}</td>
                    <td><StatusBadge status={c.status} /></td>
                    <td className="num">{(c.input_tokens + c.output_tokens).toLocaleString()}</td>
                    <td className="num">{formatUsd(c.cost_usd)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      ) : null}
      <EventLog events={events} connection={connection} origin={runStart} />
    </main>
  );
}

/** RunGraph, also reporting the graph's node ids (so nodes without a step get a state too). */
function RunGraphWithNodes(props: {
  runId: number; testedNode: string | null; marks: ReturnType<typeof nodeMarks>; selected: string | null;
  onOpen: (nodeId: string) => void; onNodes: (ids: string[]) => void;
}) {
  const { onNodes, ...rest } = props;
  return <RunGraph {...rest} onSpec={(spec) => onNodes(spec.nodes.map((n) => n.id))} />;
}
