// /runs/: every run, newest first, filtered by status, paged by the API's cursor; statuses change live.
import { useState } from "react";
import { usePageContext } from "../lib/context";
import { useRunsChanged } from "../lib/useLiveEvents";
import { compareUrl } from "../runs/actions";
import { RunTable } from "../shell/RunTable";
import type { RunSummary } from "../shell/types";
import { EmptyState, ErrorMessage, Loading, PageHeader } from "../shell/ui";
import { pagePath, useApi, type CursorPage } from "../shell/useApi";

const PAGE_SIZE = 50;
const STATUSES = ["queued", "running", "waiting", "succeeded", "failed", "cancelled"];

export default function RunList() {
  const [status, setStatus] = useState("");
  // The page on screen is the URL the API handed out (its next/previous link), or the first page.
  const [cursorPath, setCursorPath] = useState<string | null>(null);
  const [pageNo, setPageNo] = useState(1);
  const first = `runs/?page_size=${PAGE_SIZE}${status ? `&status=${status}` : ""}`;
  const path = cursorPath ?? first;
  const { data, error, loading, reload } = useApi<CursorPage<RunSummary>>(path);
  // Builders, operators and staff read every run; others (approvers) only the runs they may read.
  const can = usePageContext().user?.can;
  const seesAll = Boolean(can && (can.build || can.operate || can.admin));
  // A committed event of any run on screen reloads the page (debounced).
  useRunsChanged(data?.results, reload);
  // Runs ticked in the table (kept across pages): two of them can be compared.
  const [selected, setSelected] = useState<number[]>([]);
  const toggle = (id: number) => setSelected((s) => (s.includes(id) ? s.filter((x) => x !== id) : [...s, id]));
  const go = (url: string, step: number) => { setCursorPath(pagePath(url)); setPageNo((n) => n + step); };
  return (
    <main className="page">
      <PageHeader title="Runs" subtitle={seesAll ? "Every run, newest first. Open one to see its steps." : "The runs you may see, newest first. Open one to see its steps."} actions={<>
        {selected.length > 0 ? (
          <button type="button" className="btn" disabled={selected.length !== 2} title={selected.length === 2 ? undefined : "Select two runs of one graph"}
            onClick={() => window.location.assign(compareUrl(selected[0]!, selected[1]!))}>
            Compare {selected.length === 2 ? `#${selected[0]} and #${selected[1]}` : `(${selected.length} selected; choose 2)`}
          </button>
        ) : null}
        <button type="button" className="btn" onClick={reload} disabled={loading}>Refresh</button>
      </>} />
      <div className="toolbar">
        <label className="inline-field">
          <span>Status</span>
          <select value={status} onChange={(e) => { setStatus(e.target.value); setCursorPath(null); setPageNo(1); }}>
            <option value="">All</option>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
        {loading && data ? <Loading label="Updating…" /> : null}
      </div>
      {error ? <ErrorMessage error={error} title="The runs could not be loaded." onRetry={reload} /> : null}
      {!data && loading ? <Loading label="Loading runs…" /> : null}
      {data && data.results.length === 0 ? (
        <EmptyState title={status ? `No ${status} runs.` : "No runs yet"}>
          {status ? "Choose another status, or All." : "Start a run from a graph's builder page, the API or `manage.py run_graph`; it is listed here."}
        </EmptyState>
      ) : null}
      {data && data.results.length > 0 ? <RunTable runs={data.results} selected={new Set(selected)} onToggle={toggle} /> : null}
      {data && (data.next || data.previous) ? (
        <nav className="pager" aria-label="Pages">
          <button type="button" className="btn btn-small" disabled={!data.previous} onClick={() => data.previous && go(data.previous, -1)}>Newer</button>
          <span className="muted">Page {pageNo}</span>
          <button type="button" className="btn btn-small" disabled={!data.next} onClick={() => data.next && go(data.next, 1)}>Older</button>
        </nav>
      ) : null}
    </main>
  );
}
