// /workers/: each worker cluster's host, heartbeat and in-flight steps, and the queue depth (admins and operators).
import type { InFlightStep, WorkersBody } from "../api/types";
import { useEffect } from "react";
import { formatDateTime } from "../shell/format";
import { runUrl } from "../shell/graphLinks";
import { EmptyState, ErrorMessage, PageHeader, Skeleton, StatusBadge } from "../shell/ui";
import { useApi } from "../shell/useApi";
import "./costs/costs.css";
import { Button } from "../shell/Button";

const REFRESH_MS = 5000;

/** "4 s ago", "3 min ago", "2 h ago". */
export function ago(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

/** "N more steps of runs you may not read", or null. */
function hiddenNote(hidden: number) {
  if (!hidden) return null;
  return <p className="muted small" data-hidden={hidden}>{hidden === 1 ? "1 more step" : `${hidden} more steps`} of runs you may not read.</p>;
}

function Steps({ steps, label, hidden = 0 }: { steps: InFlightStep[]; label: string; hidden?: number }) {
  if (steps.length === 0) return hidden ? hiddenNote(hidden) : <p className="muted">Idle: no step running.</p>;
  return (
    <>
    <div className="table-wrap">
      <table className="table table-compact" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Graph</th>
            <th scope="col">Step</th>
            <th scope="col" className="num">Attempt</th>
            <th scope="col">Process</th>
            <th scope="col">Started</th>
            <th scope="col">Lease until</th>
          </tr>
        </thead>
        <tbody>
          {steps.map((s) => (
            <tr key={s.id}>
              <td><a href={runUrl(s.run)}>#{s.run}</a></td>
              <td>{s.graph}</td>
              <td><code>{s.node_id}</code></td>
              <td className="num">{s.attempt}</td>
              <td className="hash">{s.lease_owner}</td>
              <td>{formatDateTime(s.started_at)}</td>
              <td>{formatDateTime(s.lease_expires_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
    {hiddenNote(hidden)}
    </>
  );
}

export default function Workers() {
  const { data, error, loading, reload } = useApi<WorkersBody>("workers/");
  // Heartbeats move every few seconds: refresh while the page is visible.
  useEffect(() => {
    const id = window.setInterval(() => { if (document.visibilityState === "visible") reload(); }, REFRESH_MS);
    return () => window.clearInterval(id);
  }, [reload]);
  const q = data?.queue;
  return (
    <main className="page workers-page">
      <PageHeader
        title="Workers"
        subtitle="The worker clusters that run steps, their heartbeats and what each is running now; refreshed every 5 seconds."
        actions={<Button onClick={reload} disabled={loading}>Refresh</Button>}
      />
      {error ? <ErrorMessage error={error} title="The workers could not be loaded." onRetry={reload} /> : null}
      {!data && !error ? <Skeleton lines={4} variant="table" label="Loading workers…" /> : null}
      {data && q ? (
        <>
          <dl className="stats" aria-label="Queue depth">
            <div className="stat" data-stat="ready"><dt>Ready to run</dt><dd>{q.ready}</dd><dd className="stat-note muted">pending steps a worker may take now</dd></div>
            <div className="stat" data-stat="running"><dt>Running</dt><dd>{q.running}</dd><dd className="stat-note muted">steps under a lease</dd></div>
            <div className="stat" data-stat="scheduled"><dt>Scheduled</dt><dd>{q.scheduled}</dd><dd className="stat-note muted">waiting for a retry backoff</dd></div>
            <div className="stat" data-stat="waiting"><dt>At approval gates</dt><dd>{q.waiting}</dd><dd className="stat-note muted">wait for a person, hold no worker</dd></div>
            <div className={`stat${q.parked ? " stat-warn" : ""}`} data-stat="parked"><dt>Parked</dt><dd>{q.parked}</dd><dd className="stat-note muted">interrupted by a crash, need a decision</dd></div>
          </dl>
          {data.workers.length === 0 ? (
            <EmptyState title="No worker is running">
              Start one with <code>python manage.py qcluster</code> (<code>make up</code> starts one beside the web server). Until then, runs wait in the queue
              {q.ready ? ` (${q.ready} step${q.ready === 1 ? "" : "s"} ready now)` : ""}.
            </EmptyState>
          ) : null}
          {data.workers.map((w) => (
            <section key={w.name} className="card worker-card" aria-label={`Worker ${w.name}`}>
              <div className="card-head">
                <h2>
                  <span className={`dot ${w.alive ? "dot-ok" : "dot-bad"}`} aria-hidden="true" />
                  {w.host} <span className="muted">pid {w.pid}</span>
                  <StatusBadge status={w.alive ? "alive" : "silent"} />
                </h2>
                <span className="muted">
                  heartbeat {ago(w.seconds_since_heartbeat)} ({formatDateTime(w.heartbeat_at)}) · up since {formatDateTime(w.started_at)}
                </span>
              </div>
              {!w.alive ? (
                <p className="alert alert-error">
                  No heartbeat within {Math.round(data.heartbeat_window_seconds)} s, or its process is gone: recovery takes its steps back when their leases run out.
                </p>
              ) : null}
              <Steps steps={w.in_flight} hidden={w.in_flight_hidden} label={`Steps running on ${w.name}`} />
            </section>
          ))}
          {data.unattributed.length + data.unattributed_hidden > 0 ? (
            <section className="card" aria-labelledby="workers-orphans">
              <div className="card-head"><h2 id="workers-orphans">Running steps no registered worker holds</h2></div>
              <p className="muted">Their worker stopped heartbeating (or runs in a process outside a cluster); recovery takes them back once their leases expire.</p>
              <Steps steps={data.unattributed} hidden={data.unattributed_hidden} label="Steps no worker holds" />
            </section>
          ) : null}
          <p className="muted costs-foot">Checked {formatDateTime(data.checked_at)}. A worker counts as silent after {Math.round(data.heartbeat_window_seconds)} s without a heartbeat.</p>
        </>
      ) : null}
    </main>
  );
}
