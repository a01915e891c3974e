// /graphs/: search, create, duplicate, delete, import and export graphs (edit controls for builders only).
import type { GraphSummary, ImportResult, Page } from "../api/types";
import { useEffect, useState } from "react";
import { usePageContext } from "../lib/context";
import { formatDateTime } from "../shell/format";
import { AlertsDialog } from "../shell/AlertsDialog";
import { DeleteDialog, DuplicateDialog, GraphCreateActions, ImportFeedback, NewGraphDialog, type ImportFailure } from "../shell/GraphDialogs";
import { exportGraph, importedText, importedUrl } from "../shell/graphActions";
import { graphUrl } from "../shell/graphLinks";
import { EmptyState, ErrorMessage, Loading, PageHeader, Skeleton } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { Button } from "../shell/Button";

const PAGE_SIZE = 25;

/** ``value`` after it has stopped changing for ``ms`` milliseconds. */
function useDebounced<T>(value: T, ms: number): T {
  const [out, setOut] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setOut(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return out;
}

type Dialog = { kind: "new" } | { kind: "duplicate"; graph: GraphSummary } | { kind: "delete"; graph: GraphSummary } | { kind: "alerts"; graph: GraphSummary } | null;

export default function GraphList() {
  const ctx = usePageContext();
  const canBuild = ctx.user?.can.build ?? false;
  // Run alerts are for a graph's owners: builders, operators, its creator (the server checks again).
  const mayAlert = (g: GraphSummary) => canBuild || (ctx.user?.can.operate ?? false) || g.created_by === ctx.user?.username;
  const initial = new URLSearchParams(window.location.search);
  const [search, setSearch] = useState(initial.get("search") ?? "");
  const [pageNo, setPageNo] = useState(1);
  const query = useDebounced(search.trim(), 250);
  useEffect(() => setPageNo(1), [query]);
  const path = `graphs/?page=${pageNo}&page_size=${PAGE_SIZE}${query ? `&search=${encodeURIComponent(query)}` : ""}`;
  const { data, error, loading, reload } = useApi<Page<GraphSummary>>(path);
  const [dialog, setDialog] = useState<Dialog>(canBuild && initial.get("new") === "1" ? { kind: "new" } : null);
  const [notice, setNotice] = useState<{ text: string; href?: string; link?: string } | null>(null);
  const [failure, setFailure] = useState<ImportFailure | null>(null);
  const [exportError, setExportError] = useState<unknown>(null);

  const onImported = (r: ImportResult) => {
    setNotice({ text: importedText(r), href: importedUrl(r), link: r.draft_kept ? `Open version ${r.version}` : "Open it" });
    reload();
  };
  const onExport = async (g: GraphSummary) => {
    setExportError(null);
    try {
      await exportGraph(g);
    } catch (err) {
      setExportError(err);
    }
  };

  const actions = canBuild ? (
    <GraphCreateActions onNew={() => setDialog({ kind: "new" })} onImported={onImported}
      onFailure={(f) => { setFailure(f); if (f) setNotice(null); }} />
  ) : null;

  return (
    <main className="page">
      <PageHeader title="Graphs" subtitle={canBuild ? "Open a graph to edit it in the builder." : "You can open and export graphs; builders edit them."} actions={actions} />
      <div className="toolbar">
        <label className="search">
          <span className="visually-hidden">Search graphs</span>
          <input type="search" placeholder="Search by name…" value={search} onChange={(e) => setSearch(e.target.value)} />
        </label>
        {data ? <span className="muted">{data.count} graph{data.count === 1 ? "" : "s"}</span> : null}
        {loading && data ? <Loading label="Updating…" /> : null}
      </div>
      {notice ? (
        <div className="alert alert-success" role="status">
          {notice.text} {notice.href ? <a href={notice.href}>{notice.link}</a> : null}
          <Button variant="ghost" size="small" className="alert-close" icon onClick={() => setNotice(null)} aria-label="Dismiss">✕</Button>
        </div>
      ) : null}
      <ImportFeedback failure={failure} onDismiss={() => setFailure(null)} />
      {exportError ? <ErrorMessage error={exportError} title="Export failed." /> : null}
      {error ? <ErrorMessage error={error} title="The graphs could not be loaded." onRetry={reload} /> : null}
      {!data && loading ? <Skeleton lines={6} variant="table" label="Loading graphs…" /> : null}
      {data && data.results.length === 0 ? (
        query ? (
          <EmptyState title={`No graph matches “${query}”.`}>Try another part of the name.</EmptyState>
        ) : (
          <EmptyState title="No graphs yet" actions={canBuild ? <Button variant="primary" onClick={() => setDialog({ kind: "new" })}>Create your first graph</Button> : null}>
            {canBuild ? "Create a graph and build it by drag and drop, or import a graph's JSON file with “Import JSON” (the same document the CLI and API use)."
              : "A builder creates graphs; they will be listed here."}
          </EmptyState>
        )
      ) : null}
      {data && data.results.length > 0 ? (
        <div className="table-wrap">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Latest version</th>
                <th scope="col">Updated</th>
                <th scope="col">Created by</th>
                <th scope="col"><span className="visually-hidden">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              {data.results.map((g) => (
                <tr key={g.id} data-graph={g.name}>
                  <td>
                    <a href={graphUrl(g.id)} className="strong">{g.name}</a>
                    {g.description ? <div className="muted small">{g.description}</div> : null}
                  </td>
                  <td>{g.latest_version ? `v${g.latest_version}` : <span className="muted">draft only</span>}</td>
                  <td className="nowrap">{formatDateTime(g.updated_at)}</td>
                  <td>{g.created_by ?? "—"}</td>
                  <td className="row-actions">
                    {mayAlert(g) ? (
                      <Button size="small" onClick={() => setDialog({ kind: "alerts", graph: g })} aria-label={`Email alerts for ${g.name}`}>Alerts</Button>
                    ) : null}
                    <Button size="small" onClick={() => void onExport(g)} aria-label={`Export ${g.name}`}>Export</Button>
                    {canBuild ? (
                      <>
                        <Button size="small" onClick={() => setDialog({ kind: "duplicate", graph: g })} aria-label={`Duplicate ${g.name}`}>Duplicate</Button>
                        <Button variant="danger-ghost" size="small" onClick={() => setDialog({ kind: "delete", graph: g })} aria-label={`Delete ${g.name}`}>Delete</Button>
                      </>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {data && (data.next || data.previous) ? (
        <nav className="pager" aria-label="Pages">
          <Button size="small" disabled={!data.previous} onClick={() => setPageNo((n) => n - 1)}>Previous</Button>
          <span className="muted">Page {pageNo} of {Math.max(1, Math.ceil(data.count / PAGE_SIZE))}</span>
          <Button size="small" disabled={!data.next} onClick={() => setPageNo((n) => n + 1)}>Next</Button>
        </nav>
      ) : null}
      {dialog?.kind === "new" ? <NewGraphDialog onClose={() => setDialog(null)} /> : null}
      {dialog?.kind === "alerts" ? <AlertsDialog graphId={dialog.graph.id} graphName={dialog.graph.name} onClose={() => setDialog(null)} /> : null}
      {dialog?.kind === "duplicate" ? (
        <DuplicateDialog graph={dialog.graph} onClose={() => setDialog(null)} onDone={(copy) => {
          setDialog(null);
          setNotice({ text: `Duplicated as “${copy.name}”.`, href: graphUrl(copy.id), link: "Open it" });
          reload();
        }} />
      ) : null}
      {dialog?.kind === "delete" ? (
        <DeleteDialog graph={dialog.graph} onClose={() => setDialog(null)} onDone={() => {
          setDialog(null);
          setNotice({ text: `Deleted “${dialog.graph.name}”.` });
          reload();
        }} />
      ) : null}
    </main>
  );
}
