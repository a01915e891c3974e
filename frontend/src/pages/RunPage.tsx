// /runs/<id>/: one run: status, the version it ran, input, output or error, steps (plain; a later issue makes it live).
import { formatDateTime, formatDuration, formatUsd } from "../shell/format";
import { graphUrl } from "../shell/graphLinks";
import type { RunDetail } from "../shell/types";
import { EmptyState, ErrorMessage, Loading, PageHeader, StatusBadge } from "../shell/ui";
import { useApi } from "../shell/useApi";

/** Pretty JSON in a scrollable block; "—" for null/undefined. */
export function JsonBlock({ value, label }: { value: unknown; label: string }) {
  if (value === null || value === undefined) return <p className="muted">—</p>;
  return <pre className="json" aria-label={label} tabIndex={0}>{JSON.stringify(value, null, 2)}</pre>;
}

/** An error value from the engine (``{"type", "message", ...}`` or a string) as one line. */
export function errorText(error: unknown): string {
  if (error === null || error === undefined) return "";
  if (typeof error === "string") return error;
  if (typeof error === "object") {
    const e = error as { type?: string; message?: string };
    if (e.message) return e.type ? `${e.type}: ${e.message}` : e.message;
  }
  return JSON.stringify(error);
}

/** The node an engine error names (``node_id``), if any. */
function failedAt(error: unknown): string | null {
  const id = error && typeof error === "object" ? (error as { node_id?: unknown }).node_id : undefined;
  return typeof id === "string" ? id : null;
}

export default function RunPage({ runId }: { runId?: unknown }) {
  const id = Number(runId);
  const { data: run, error, loading, reload } = useApi<RunDetail>(Number.isInteger(id) ? `runs/${id}/` : null);
  if (error) return <main className="page"><ErrorMessage error={error} title={`Run ${id} could not be loaded.`} onRetry={reload} /></main>;
  if (!run || (loading && !run)) return <main className="page"><Loading label="Loading the run…" /></main>;
  const tokens = run.input_tokens + run.output_tokens;
  return (
    <main className="page">
      <nav className="breadcrumbs" aria-label="Breadcrumbs"><a href="/runs/">Runs</a> <span aria-hidden="true">/</span> Run #{run.id}</nav>
      <PageHeader
        title={<>Run #{run.id} <StatusBadge status={run.status} /></>}
        subtitle={<>Graph <a href={graphUrl(run.graph)}>{run.graph_name}</a>, version {run.version}</>}
        actions={<>
          <a className="btn" href={graphUrl(run.graph)}>Open graph</a>
          <button type="button" className="btn" onClick={reload} disabled={loading}>Refresh</button>
        </>}
      />
      <dl className="facts card">
        <div><dt>Version</dt><dd><a href={`${graphUrl(run.graph)}?version=${run.version}`} title="Open this version read-only in the builder">v{run.version}</a></dd></div>
        <div><dt>Started by</dt><dd>{run.created_by ?? run.started_from ?? "—"}</dd></div>
        <div><dt>Started</dt><dd>{formatDateTime(run.started_at ?? run.created_at)}</dd></div>
        <div><dt>Finished</dt><dd>{formatDateTime(run.finished_at)}</dd></div>
        <div><dt>Duration</dt><dd>{formatDuration(run.started_at, run.finished_at)}</dd></div>
        <div><dt>Steps</dt><dd>{run.step_count}</dd></div>
        <div><dt>Tokens</dt><dd>{tokens.toLocaleString()}</dd></div>
        <div><dt>Cost</dt><dd>{formatUsd(run.cost_usd)}</dd></div>
      </dl>
      {run.error ? (
        <div className="alert alert-error" role="alert"><strong>The run failed{failedAt(run.error) ? ` at ${failedAt(run.error)}` : ""}.</strong> {errorText(run.error)}</div>
      ) : null}
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
        {run.steps.length === 0 ? <EmptyState title="No steps yet">The run's steps appear here as the workers take them.</EmptyState> : (
          <div className="table-wrap">
            <table className="table">
              <thead>
                <tr>
                  <th scope="col">Node</th><th scope="col">Kind</th><th scope="col">Status</th><th scope="col">Attempts</th>
                  <th scope="col">Started</th><th scope="col">Duration</th><th scope="col" className="num">Cost</th><th scope="col">Error</th>
                </tr>
              </thead>
              <tbody>
                {run.steps.map((s) => (
                  <tr key={s.id}>
                    <td className={s.parent ? "indent" : undefined}><code>{s.node_id}</code>{s.iteration > 0 ? <span className="muted small"> #{s.iteration + 1}</span> : null}</td>
                    <td>{s.kind}</td>
                    <td><StatusBadge status={s.status} /></td>
                    <td>{s.attempt} / {s.max_attempts}</td>
                    <td>{formatDateTime(s.started_at)}</td>
                    <td>{formatDuration(s.started_at, s.finished_at)}</td>
                    <td className="num">{formatUsd(s.cost_usd)}</td>
                    <td className="error-cell">{errorText(s.error)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </main>
  );
}
