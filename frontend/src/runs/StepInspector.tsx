// The run page's step inspector: one step's input, output, error, attempts (usage, cost, worker, build), lease, key, timings,
// an agent's transcript (its child steps) and the run state after the step with what it changed.
import type { Attempt, ChildStep, RunApproval, StepDetail, StepStateAnswer, Usage } from "../api/types";
import { DecideLink } from "./ApprovalLinks";
import { JsonBlock, errorText } from "./JsonBlock";
import { epochMs, formatClock, formatSpan } from "../lib/time";
import { formatDuration, formatUsd, stepDisplayStatus } from "../shell/format";
import { ErrorMessage, Skeleton, StatusBadge, When } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { stateChangeRows, stateKeysOrdered, stepState } from "./runView";
import { Button } from "../shell/Button";
import { runUrl } from "../shell/graphLinks";

/** A JSON value as an object to read keys from ({} for anything else): a child step's input and output are free JSON. */
function fields(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function tokens(u: Usage | null | undefined): string {
  if (!u) return "—";
  const n = (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
  return `${n.toLocaleString("en-US")} (${(u.input_tokens ?? 0).toLocaleString("en-US")} in / ${(u.output_tokens ?? 0).toLocaleString("en-US")} out)`;
}

function short(value: unknown, max = 160): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** "backoff 2.0 s" after a failed attempt that was retried (from its end to the next attempt's due time); "" otherwise. */
function backoffText(a: Attempt): string {
  const from = epochMs(a.finished_at);
  const to = epochMs(a.retry_at);
  // A retry due at once waited for nothing: no backoff to tell.
  return from === null || to === null || to - from < 1 ? "" : `backoff ${formatSpan(to - from)}`;
}

/**
 * The status an attempt is shown with: the last attempt of a step waiting at a gate ran to
 * its end (stored "succeeded": it asked for the decision), but the step's result is the
 * decision, not yet made: "waiting" until it is.
 */
export function attemptShownStatus(a: Pick<Attempt, "status" | "number">, step: Pick<StepDetail, "status" | "attempt">): string {
  return step.status === "waiting" && a.number === step.attempt && a.status === "succeeded" ? "waiting" : a.status;
}

/**
 * When a step is shown as created. A step a commit creates already leased to its worker
 * (the next node, taken at once) is created and started in one transaction, but its stored
 * ``created_at`` is stamped at the insert, after the commit read its clock for
 * ``started_at``: it can read a few ms later than the start. Shown then as its start (the
 * same commit), with ``sameCommit`` set.
 */
export function createdShown(step: Pick<StepDetail, "created_at" | "started_at">): { at: string; sameCommit: boolean } {
  const created = epochMs(step.created_at);
  const started = epochMs(step.started_at);
  return created !== null && started !== null && started < created ? { at: step.started_at!, sameCommit: true } : { at: step.created_at, sameCommit: false };
}

/** The attempts table: each attempt's own worker and build, usage, cost and time (to the ms, and its offset from ``runStart``), and the backoff after a failed one. */
function Attempts({ attempts, runStart, step }: { attempts: Attempt[]; runStart?: string | null; step: Pick<StepDetail, "status" | "attempt"> }) {
  if (attempts.length === 0) return <p className="muted">No attempt yet: the step has not been claimed by a worker.</p>;
  return (
    <div className="table-wrap">
      <table className="table table-compact attempts" aria-label="Attempts">
        <thead><tr><th scope="col" className="num">#</th><th scope="col">Status</th><th scope="col">Worker · build</th><th scope="col">Started · took</th><th scope="col" className="num">Cost</th></tr></thead>
        <tbody>
          {attempts.map((a) => (
            <tr key={a.number}>
              <td className="num">{a.number}</td>
              <td><StatusBadge status={attemptShownStatus(a, step)} />{a.error ? <div className="error-cell small">{errorText(a.error)}</div> : null}</td>
              <td><code className="small">{a.worker || "—"}</code>
                {a.build ? <div className="muted small" title="The build of the code that ran this attempt">build <code>{a.build}</code></div> : null}</td>
              <td className="small"><When at={a.started_at} origin={runStart} short /> · <span className="nowrap">{formatDuration(a.started_at, a.finished_at)}</span>
                {backoffText(a) ? <div className="muted nowrap" title={`The next attempt was due at ${formatClock(a.retry_at)}`}>{backoffText(a)}</div> : null}</td>
              <td className="num">
                {a.usage && a.cost_usd === null ? "unknown" : formatUsd(a.cost_usd)}
                {a.usage ? <div className="muted small" title={tokens(a.usage)}>{((a.usage.input_tokens ?? 0) + (a.usage.output_tokens ?? 0)).toLocaleString("en-US")} tok</div> : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** An agent's transcript: its model turns and tool calls, each the child step that committed it. */
function Transcript({ children }: { children: ChildStep[] }) {
  return (
    <ol className="transcript" aria-label="Agent transcript">
      {children.map((c) => {
        const turn = c.kind === "model_turn" || c.child_key.startsWith("turn-");
        const output = fields(c.output);
        const input = fields(c.input);
        const calls = (output.tool_calls as { id: string; name: string; arguments: unknown }[] | undefined) ?? [];
        return (
          <li key={c.id} className={`transcript__item transcript__item--${turn ? "turn" : "tool"}`} data-child={c.child_key}>
            <div className="transcript__head">
              <strong>{turn ? `Model turn ${Number(c.child_key.split("-")[1] ?? 0) + 1}` : `Tool call ${String(input.tool ?? "")}`}</strong>
              <StatusBadge status={c.status} />
              {c.child_run !== null ? <a className="small child-run-link" href={runUrl(c.child_run)}>child run #{c.child_run}</a> : null}
              <span className="muted small">
                {[turn ? String(output.model ?? c.usage?.model ?? "") : "", c.usage ? tokens(c.usage) : "", c.cost_usd !== null ? formatUsd(c.cost_usd) : c.usage ? "cost unknown" : "",
                  formatDuration(c.started_at, c.finished_at), c.attempt > 1 ? `${c.attempt} attempts` : "", `step #${c.id}`].filter(Boolean).join(" · ")}
              </span>
            </div>
            {turn ? (
              <>
                {output.text ? <p className="transcript__text">{String(output.text)}</p> : null}
                {calls.length > 0 ? <ul className="transcript__calls">{calls.map((call) => <li key={call.id}><code>{call.name}({short(call.arguments, 120)})</code></li>)}</ul> : null}
              </>
            ) : (
              <>
                <div className="small"><span className="muted">arguments</span> <code>{short(input.arguments ?? {}, 200)}</code></div>
                {c.output ? <div className="small"><span className="muted">result</span> <code>{short(c.output, 300)}</code></div> : null}
              </>
            )}
            {c.error ? <div className="error-cell small">{errorText(c.error)}</div> : null}
          </li>
        );
      })}
    </ol>
  );
}

/** The state after a committed step: the keys it changed (before → after) first, then all of it. */
function StateAfter({ answer }: { answer: StepStateAnswer & { state: Record<string, unknown> } }) {
  const rows = stateChangeRows(answer.changed);
  return (
    <>
      <h4 className="inspector__sub">Changed by this step{answer.previous_step ? <span className="muted small"> (against the state after step #{answer.previous_step})</span> : null}</h4>
      {rows.length === 0 ? <p className="muted">This step changed no state key.</p> : (
        <div className="table-wrap">
          <table className="table table-compact state-diff" aria-label="State difference">
            <thead><tr><th scope="col">Key</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.key} data-key={r.key} data-change={r.change}>
                  <td><code>{r.key}</code> {r.change === "added" ? <span className="diff-tag diff-tag--added">new</span> : null}</td>
                  <td className="diff-before"><code>{r.change === "added" ? "—" : short(r.before, 400)}</code></td>
                  <td className="diff-after"><code>{short(r.after, 400)}</code></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h4 className="inspector__sub">State after this step</h4>
      <dl className="state-keys" aria-label="State after this step">
        {stateKeysOrdered(answer.state, answer.changed).map(({ key, changed }) => (
          <div key={key} className={changed ? "state-keys__changed" : undefined}><dt><code>{key}</code></dt><dd><code>{short(answer.state[key], 300)}</code></dd></div>
        ))}
      </dl>
    </>
  );
}

/** The state after a step, or why there is none (a top-level step's view from GET steps/<id>/state/). */
function StateSection({ answer, status }: { answer: StepStateAnswer; status: string }) {
  return (
    <section aria-labelledby="insp-state" className="inspector__state">
      <h4 id="insp-state" className="inspector__sub">Run state after this step</h4>
      {answer.state !== null ? <StateAfter answer={answer as StepStateAnswer & { state: Record<string, unknown> }} /> : (
        <p className="muted">{status === "failed" ? "The step failed: it changed no state." : "The state after a step is kept when it succeeds."}</p>
      )}
    </section>
  );
}

/** Whether a step may be forked from: a committed top-level step that something follows (not an end node). */
export function forkable(step: Pick<StepDetail, "parent" | "status" | "kind">): boolean {
  return step.parent === null && step.status === "succeeded" && step.kind !== "end";
}

export interface StepInspectorProps {
  stepId: number;
  /** Changes when the step moves on (status, attempt, children), seen through the run's live events: read again. */
  revision: string;
  /** Whether the step is a top-level one (known from the run's steps): its run state is read beside its detail. */
  topLevel?: boolean;
  onClose(): void;
  /** Given when the user may fork the run: "Fork from this step" calls it with the step's id. */
  onFork?(stepId: number): void;
  /** The run's start: the step's times say how long after it they fell ("+1.250 s"). */
  runStart?: string | null;
  /** The pending approval request the step waits for (a gate, or a parked step's decision): linked as "Decide…". */
  approval?: RunApproval;
}

/**
 * The inspector of step ``stepId``: its facts (attempt, lease owner and expiry, idempotency
 * key, timings, usage and cost), every attempt, an agent's transcript, the state it was
 * given, its output and error, and the run state after it with what it changed.
 */
export function StepInspector({ stepId, revision, topLevel, onClose, onFork, runStart, approval }: StepInspectorProps) {
  const { data: step, error, reload } = useApi<StepDetail>(`steps/${stepId}/?r=${encodeURIComponent(revision)}`);
  // A top-level step's state is asked for at once when the page knows it is one (else once its detail says so).
  const top = topLevel ?? (step && step.id === stepId ? step.parent === null : undefined);
  const stateAnswer = useApi<StepStateAnswer>(top ? `steps/${stepId}/state/?r=${encodeURIComponent(revision)}` : null);
  if (error && !step) return <aside className="inspector card" aria-label="Step inspector"><ErrorMessage error={error} title={`Step ${stepId} could not be loaded.`} onRetry={reload} /></aside>;
  if (!step || step.id !== stepId) return <aside className="inspector card" aria-label="Step inspector"><Skeleton lines={6} label="Loading the step…" /></aside>;
  const state = stepState(step);
  const created = createdShown(step);
  const answer = stateAnswer.data && stateAnswer.data.step === stepId ? stateAnswer.data : undefined;
  const stateView = step.parent !== null ? null
    : stateAnswer.error ? <ErrorMessage error={stateAnswer.error} title="The run state at this step could not be loaded." onRetry={stateAnswer.reload} />
    : !answer ? <Skeleton lines={3} label="Reading the state…" /> : null;
  return (
    <aside className="inspector card" aria-label="Step inspector" data-step={step.id}>
      <header className="inspector__head">
        <h3 id="inspector-title"><code>{step.node_id}</code>{step.iteration > 0 ? <span className="muted"> #{step.iteration + 1}</span> : null}</h3>
        <StatusBadge status={state === "retrying" ? "retrying" : stepDisplayStatus(step)} />
        <Button size="small" className="inspector__close" icon onClick={onClose} aria-label="Close the step inspector">×</Button>
      </header>
      {approval ? (
        <div className="inspector__actions inspector__approval">
          <DecideLink approval={approval} />
          <span className="muted small">{approval.purpose === "gate" ? "the step waits for a person to approve or reject it" : "a person retries, skips or fails the step"}</span>
        </div>
      ) : null}
      {onFork && forkable(step) ? (
        <div className="inspector__actions">
          <Button size="small" onClick={() => onFork(step.id)}>Fork from this step…</Button>
          <span className="muted small">a new run from the state after it, edited</span>
        </div>
      ) : null}
      <dl className="facts facts--inspector">
        <div><dt>Kind</dt><dd>{step.kind}</dd></div>
        <div><dt>Attempt</dt><dd>{step.attempt} of {step.max_attempts}</dd></div>
        <div><dt>Created</dt><dd><When at={created.at} origin={runStart} short />{created.sameCommit
          ? <div className="muted small" title={`Its row was stamped ${formatClock(step.created_at)}, at the insert in that commit`}>with its start, in one commit</div> : null}</dd></div>
        <div><dt>Started</dt><dd><When at={step.started_at} origin={runStart} short /></dd></div>
        <div><dt>Finished</dt><dd><When at={step.finished_at} origin={runStart} short /></dd></div>
        <div><dt>Duration</dt><dd>{formatDuration(step.started_at, step.finished_at)}</dd></div>
        <div><dt>Tokens</dt><dd>{tokens(step.usage)}</dd></div>
        <div><dt>Cost</dt><dd>{step.usage && step.cost_usd === null ? "unknown" : formatUsd(step.cost_usd)}</dd></div>
        <div><dt>Worker</dt><dd>{lastWorker(step) ? <code className="small" aria-label="Worker">{lastWorker(step)}</code> : "—"}</dd></div>
        <div><dt>Lease owner</dt><dd>{step.lease_owner ? <code className="small">{step.lease_owner}</code> : "—"}{step.worker_alive === false ? <span className="badge-inline bad"> not heartbeating</span> : null}</dd></div>
        <div><dt>Lease expires</dt><dd><When at={step.lease_expires_at} ago /></dd></div>
        {step.available_at && step.status === "pending" ? <div><dt>Retry due</dt><dd><When at={step.available_at} ago /></dd></div> : null}
        <div className="facts__wide"><dt>Idempotency key</dt><dd><code className="small" aria-label="Idempotency key">{step.idempotency_key}</code></dd></div>
      </dl>
      {/* A step that succeeded after a failed attempt keeps that attempt's error: it shows in Attempts. */}
      {step.error && step.status !== "succeeded" ? <div className="alert alert-error" role="alert"><strong>Error.</strong> {errorText(step.error)}</div> : null}
      <section aria-labelledby="insp-attempts"><h4 id="insp-attempts" className="inspector__sub">Attempts</h4><Attempts attempts={step.attempts} runStart={runStart} step={step} /></section>
      {step.children.length > 0 ? (
        <section aria-labelledby="insp-transcript"><h4 id="insp-transcript" className="inspector__sub">Transcript ({step.children.length} child steps)</h4><Transcript children={step.children} /></section>
      ) : null}
      {step.parent !== null ? (
        <section aria-labelledby="insp-input"><h4 id="insp-input" className="inspector__sub">Input</h4><JsonBlock value={step.input} label="Step input" /></section>
      ) : answer ? (
        <section aria-labelledby="insp-input"><h4 id="insp-input" className="inspector__sub">Input state <span className="muted small">(as committed when its latest attempt started)</span></h4>
          {answer.input_state === null ? <p className="muted">The step has not started.</p> : <JsonBlock value={answer.input_state} label="Step input" />}
        </section>
      ) : stateView}
      <section aria-labelledby="insp-output"><h4 id="insp-output" className="inspector__sub">Output</h4>
        {step.output === null || step.output === undefined ? <p className="muted">{step.status === "succeeded" ? "No output." : "No output yet."}</p> : <JsonBlock value={step.output} label="Step output" />}
      </section>
      {step.error && step.status !== "succeeded" ? <section aria-labelledby="insp-error"><h4 id="insp-error" className="inspector__sub">Error detail</h4><JsonBlock value={step.error} label="Step error" /></section> : null}
      {step.parent !== null
        ? <p className="muted">A child step writes no run state; its parent step does when it commits.</p>
        : answer ? <StateSection answer={answer} status={step.status} /> : null}
    </aside>
  );
}

/** The worker of the step's latest attempt (who ran it last), or "". */
function lastWorker(step: Pick<StepDetail, "attempts">): string {
  return step.attempts.length ? step.attempts[step.attempts.length - 1]!.worker : "";
}
