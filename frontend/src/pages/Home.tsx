// /: the signed-in user's start page: their graphs and the latest runs, with a way in for a new user.
import { useState } from "react";
import { usePageContext } from "../lib/context";
import { formatDateTime } from "../shell/format";
import { ImportButton, ImportFeedback, NewGraphDialog, type ImportFailure } from "../shell/GraphDialogs";
import type { ImportResult } from "../shell/graphActions";
import { graphUrl } from "../shell/graphLinks";
import { RunTable } from "../shell/RunTable";
import type { GraphSummary, RunSummary } from "../shell/types";
import { EmptyState, ErrorMessage, Loading, PageHeader } from "../shell/ui";
import { useApi, type CursorPage, type Page } from "../shell/useApi";
import "./home.css";

export default function Home() {
  const ctx = usePageContext();
  const user = ctx.user!;
  const canBuild = user.can.build;
  const graphs = useApi<Page<GraphSummary>>("graphs/?page_size=8");
  const runs = useApi<CursorPage<RunSummary>>("runs/?page_size=8");
  const [creating, setCreating] = useState(false);
  const [failure, setFailure] = useState<ImportFailure | null>(null);
  const onImported = (r: ImportResult) => window.location.assign(graphUrl(r.graph));

  const buildActions = canBuild ? (
    <>
      <button type="button" className="btn btn-primary" onClick={() => setCreating(true)}>New graph</button>
      <ImportButton onImported={onImported} onFailure={setFailure} />
    </>
  ) : null;

  return (
    <main className="page">
      <PageHeader title={`Welcome, ${user.display_name}`} subtitle="Your graphs and the latest runs." actions={buildActions} />
      <ImportFeedback failure={failure} onDismiss={() => setFailure(null)} />
      <div className="grid-2 home-grid">
        <section className="card" aria-labelledby="home-graphs">
          <div className="card-head">
            <h2 id="home-graphs">Graphs</h2>
            {graphs.data && graphs.data.count > 0 ? <a href="/graphs/">{graphs.data.count === 1 ? "All graphs" : `All ${graphs.data.count} graphs`} →</a> : null}
          </div>
          {graphs.error ? <ErrorMessage error={graphs.error} title="The graphs could not be loaded." onRetry={graphs.reload} /> : null}
          {!graphs.data && graphs.loading ? <Loading label="Loading graphs…" /> : null}
          {graphs.data && graphs.data.results.length === 0 ? (
            <EmptyState title="No graphs yet" actions={canBuild ? <button type="button" className="btn btn-primary" onClick={() => setCreating(true)}>Create your first graph</button> : null}>
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
                  <span className="muted small">{g.latest_version ? `v${g.latest_version}` : "draft only"} · updated {formatDateTime(g.updated_at)}</span>
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
          {!runs.data && runs.loading ? <Loading label="Loading runs…" /> : null}
          {runs.data && runs.data.results.length === 0 ? (
            <EmptyState title="No runs yet">
              {user.can.operate ? "Open a graph and start a run from the builder; it will be listed here." : "Runs that operators start are listed here."}
            </EmptyState>
          ) : null}
          {runs.data && runs.data.results.length > 0 ? <RunTable runs={runs.data.results} compact /> : null}
        </section>
      </div>
      {creating ? <NewGraphDialog onClose={() => setCreating(false)} /> : null}
    </main>
  );
}
