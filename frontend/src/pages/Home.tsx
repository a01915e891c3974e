// /: the signed-in user's dashboard: runs of the last 24 hours by status, approvals waiting for them, spend today and this
// week, the latest failures with their error, their graphs and the latest runs; a new user sees how to begin.
import type { CostTotals, CursorPage, GraphSummary, ImportResult, InboxCounts, Page, RunSummary, RunsSummary } from "../api/types";
import { useMemo, useState } from "react";
import { usePageContext } from "../lib/context";
import { useNewRuns, useRunsChanged } from "../lib/useLiveEvents";
import { formatDateTime, formatSpend, versionText } from "../shell/format";
import { GraphCreateActions, ImportFeedback, NewGraphDialog, type ImportFailure } from "../shell/GraphDialogs";
import { importedUrl } from "../shell/graphActions";
import { graphUrl, runUrl } from "../shell/graphLinks";
import { RunTable } from "../shell/RunTable";
import { EmptyState, ErrorMessage, PageHeader, Skeleton, StatusBadge } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { costsLink, errorLine, runsLink, spendPeriod, spendRanges } from "./dashboard";
import "./home.css";
import { Button } from "../shell/Button";

const STATUS_ORDER = ["running", "waiting", "queued", "failed", "succeeded", "cancelled"];

function Stat({ title, children, id }: { title: string; children: React.ReactNode; id: string }) {
  return (
    <section className="card stat-card" aria-labelledby={id}>
      <h2 id={id} className="stat-title">{title}</h2>
      {children}
    </section>
  );
}

function Spend({ label, range, week = false }: { label: string; range: { since: string; until: string }; week?: boolean }) {
  const totals = useApi<CostTotals>(`costs/totals/?since=${range.since}&until=${range.until}`);
  const id = `spend-${label.replace(/\W+/g, "-").toLowerCase()}`;
  return (
    <Stat title={label} id={id}>
      {totals.error ? <ErrorMessage error={totals.error} title="Spend could not be loaded." onRetry={totals.reload} /> : null}
      {!totals.data && totals.loading ? <Skeleton lines={3} /> : null}
      {totals.data ? (
        <>
          <a className="stat-figure" href={costsLink(range)}>{formatSpend(totals.data.cost_usd, totals.data.unpriced_attempts, totals.data.attempts)}</a>
          <p className="muted small">
            {totals.data.attempts === 0 ? "Nothing spent" : `${totals.data.attempts} step attempt${totals.data.attempts === 1 ? "" : "s"} with spend`}
            {totals.data.unpriced_attempts > 0 ? ` · ${totals.data.unpriced_attempts} with no known price` : ""}
            {spendPeriod(week, range)}
          </p>
        </>
      ) : null}
    </Stat>
  );
}

export default function Home() {
  const ctx = usePageContext();
  const user = ctx.user!;
  const canBuild = user.can.build;
  const ranges = useMemo(() => spendRanges(), []);
  const graphs = useApi<Page<GraphSummary>>("graphs/?page_size=8");
  const runs = useApi<CursorPage<RunSummary>>("runs/?page_size=8");
  const failures = useApi<CursorPage<RunSummary>>("runs/?page_size=5&status=failed");
  const summary = useApi<RunsSummary>("runs/summary/?hours=24");
  const inbox = useApi<InboxCounts>("approvals/inbox/counts/");
  const [creating, setCreating] = useState(false);
  const [failure, setFailure] = useState<ImportFailure | null>(null);
  const onImported = (r: ImportResult) => window.location.assign(importedUrl(r));
  // Live: a run on screen committing an event, or a new run, refreshes the runs and their counts.
  const refreshRuns = () => { runs.reload(); failures.reload(); summary.reload(); };
  useRunsChanged(runs.data?.results, refreshRuns, 500);
  useNewRuns(true, refreshRuns, 500);

  const buildActions = canBuild ? <GraphCreateActions onNew={() => setCreating(true)} onImported={onImported} onFailure={setFailure} /> : null;

  return (
    <main className="page">
      <PageHeader title={`Welcome, ${user.display_name}`} subtitle="What ran, what waits for you, and what it cost." actions={buildActions} />
      <ImportFeedback failure={failure} onDismiss={() => setFailure(null)} />
      <div className="stat-grid">
        <Stat title="Runs, last 24 hours" id="home-24h">
          {summary.error ? <ErrorMessage error={summary.error} title="The counts could not be loaded." onRetry={summary.reload} /> : null}
          {!summary.data && summary.loading ? <Skeleton lines={3} /> : null}
          {summary.data ? (
            <>
              <a className="stat-figure" href={`/runs/?from=${summary.data.since.slice(0, 10)}`}>{summary.data.total}</a>
              {summary.data.total === 0 ? <p className="muted small">No runs started in the last 24 hours.</p> : (
                <ul className="status-counts" aria-label="Runs of the last 24 hours by status">
                  {STATUS_ORDER.filter((s) => (summary.data!.by_status[s] ?? 0) > 0).map((s) => (
                    <li key={s}>
                      {/* The count first: the link's name ("2 waiting") is what it shows, in that order. */}
                      <a href={runsLink(s, summary.data!.since)}>
                        <span className="status-count">{summary.data!.by_status[s]}</span> <StatusBadge status={s} />
                      </a>
                    </li>
                  ))}
                </ul>
              )}
            </>
          ) : null}
        </Stat>
        <Stat title="Approvals waiting for you" id="home-approvals">
          {inbox.error ? <ErrorMessage error={inbox.error} title="The inbox could not be counted." onRetry={inbox.reload} /> : null}
          {!inbox.data && inbox.loading ? <Skeleton lines={3} /> : null}
          {inbox.data ? (
            <>
              <a className="stat-figure" href="/approvals/">{inbox.data.waiting}</a>
              <p className="muted small">
                {inbox.data.waiting === 0 ? "Nothing to decide." : `${inbox.data.assigned} assigned to you · ${inbox.data.group} in your groups`}
              </p>
            </>
          ) : null}
        </Stat>
        <Spend label="Spend today" range={ranges.today} />
        <Spend label="Spend this week" range={ranges.week} week />
      </div>

      <section className="card home-failures" aria-labelledby="home-failures">
        <div className="card-head">
          <h2 id="home-failures">Latest failures</h2>
          {failures.data && failures.data.results.length > 0 ? <a href="/runs/?status=failed">All failed runs →</a> : null}
        </div>
        {failures.error ? <ErrorMessage error={failures.error} title="The failed runs could not be loaded." onRetry={failures.reload} /> : null}
        {!failures.data && failures.loading ? <Skeleton lines={3} /> : null}
        {failures.data && failures.data.results.length === 0 ? (
          <EmptyState title="No failed runs">Runs that fail are listed here with their error, newest first, each linking to its run page.</EmptyState>
        ) : null}
        {failures.data && failures.data.results.length > 0 ? (
          <ul className="list">
            {failures.data.results.map((r) => (
              <li key={r.id} className="list-item failure-item">
                <div className="failure-main">
                  <a href={runUrl(r.id)} className="strong">#{r.id}</a> <a href={graphUrl(r.graph)}>{r.graph_name}</a> <span className="muted small">{versionText(r)}</span>
                  <div className="failure-error" title={errorLine(r.error, 2000)}>{errorLine(r.error)}</div>
                </div>
                <span className="muted small nowrap">{formatDateTime(r.finished_at ?? r.created_at)}</span>
              </li>
            ))}
          </ul>
        ) : null}
      </section>

      <div className="home-grid">
        <section className="card" aria-labelledby="home-graphs">
          <div className="card-head">
            <h2 id="home-graphs">Graphs</h2>
            {graphs.data && graphs.data.count > 0 ? <a href="/graphs/">{graphs.data.count === 1 ? "All graphs" : `All ${graphs.data.count} graphs`} →</a> : null}
          </div>
          {graphs.error ? <ErrorMessage error={graphs.error} title="The graphs could not be loaded." onRetry={graphs.reload} /> : null}
          {!graphs.data && graphs.loading ? <Skeleton lines={4} variant="table" label="Loading graphs…" /> : null}
          {graphs.data && graphs.data.results.length === 0 ? (
            <EmptyState title="No graphs yet" actions={canBuild ? <Button variant="primary" onClick={() => setCreating(true)}>Create your first graph</Button> : null}>
              {canBuild ? (
                <>Create a graph and build it on the canvas by drag and drop, or import a graph's JSON file with “Import JSON” above
                  (the document the CLI and API use; the repository's <code>examples/</code> folder has some).</>
              ) : "A builder creates graphs; they will appear here."}
            </EmptyState>
          ) : null}
          {graphs.data && graphs.data.results.length > 0 ? (
            <ul className="list">
              {graphs.data.results.map((g) => (
                <li key={g.id} className="list-item">
                  <a href={graphUrl(g.id)} className="strong">{g.name}</a>
                  <span className="muted small">{g.latest_version ? `v${g.latest_version}` : "draft only"} · updated <span className="nowrap">{formatDateTime(g.updated_at)}</span></span>
                </li>
              ))}
            </ul>
          ) : null}
        </section>
        <section className="card home-runs" aria-labelledby="home-runs">
          <div className="card-head">
            <h2 id="home-runs">Latest runs</h2>
            {runs.data && runs.data.results.length > 0 ? <a href="/runs/">All runs →</a> : null}
          </div>
          {runs.error ? <ErrorMessage error={runs.error} title="The runs could not be loaded." onRetry={runs.reload} /> : null}
          {!runs.data && runs.loading ? <Skeleton lines={4} variant="table" label="Loading runs…" /> : null}
          {runs.data && runs.data.results.length === 0 ? (
            <EmptyState title="No runs yet">
              {user.can.operate ? "Open a graph and start a run from the builder; it will be listed here." : "Runs that operators start are listed here."}
            </EmptyState>
          ) : null}
          {runs.data && runs.data.results.length > 0 ? <RunTable runs={runs.data.results} compact label="Latest runs" /> : null}
        </section>
      </div>
      {creating ? <NewGraphDialog onClose={() => setCreating(false)} /> : null}
    </main>
  );
}
