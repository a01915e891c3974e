// /runs/: the runs the user may read, newest first: filters kept in the URL, keyset pages, bulk cancel, compare two; statuses and new runs arrive live.
import type { BulkCancel, BulkCancelResult, CursorPage, GraphSummary, Page, RunSummary } from "../api/types";
import { useEffect, useMemo, useState, type FormEvent } from "react";
import { api, ApiError } from "../lib/api";
import { usePageContext } from "../lib/context";
import { useConnection, useNewRuns, useRunsChanged } from "../lib/useLiveEvents";
import { compareUrl } from "../runs/actions";
import { RunTable } from "../shell/RunTable";
import { EmptyState, ErrorMessage, LiveStatus, Loading, Modal, PageHeader, Skeleton } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { apiPath, cancellable, compareRefusal, cursorOf, filtersFromQuery, hasFilters, NO_FILTERS, queryFromFilters, RUN_STATUSES, summarizeBulkCancel, type RunFilters } from "./runFilters";
import "./runlist.css";
import { Button } from "../shell/Button";

const PAGE_SIZE = 50;

interface BulkOutcome { summary: string; refused: BulkCancelResult[] }

export default function RunList() {
  const ctx = usePageContext();
  const canOperate = Boolean(ctx.user?.can.operate);
  const initial = useMemo(() => filtersFromQuery(window.location.search), []);
  const [filters, setFilters] = useState<RunFilters>(initial.filters);
  const [draft, setDraft] = useState({ user: initial.filters.user, search: initial.filters.search });
  const [cursor, setCursor] = useState<string | null>(initial.cursor);
  const [pageNo, setPageNo] = useState<number | null>(initial.cursor ? null : 1);
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [confirming, setConfirming] = useState(false);
  const [outcome, setOutcome] = useState<BulkOutcome | null>(null);

  // The filters (and the page) live in the URL: a reload or a shared link shows the same list.
  useEffect(() => {
    const q = queryFromFilters(filters, cursor);
    if (q !== window.location.search) window.history.replaceState(null, "", q || window.location.pathname);
  }, [filters, cursor]);

  const path = apiPath(filters, PAGE_SIZE) + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : "");
  const { data, error, loading, reload } = useApi<CursorPage<RunSummary>>(path);
  const graphs = useApi<Page<GraphSummary>>("graphs/?page_size=200");
  // A committed event of a run on screen reloads the page; on the first page, so does a new run.
  useRunsChanged(data?.results, reload);
  useNewRuns(cursor === null, reload);
  const connection = useConnection();

  const apply = (change: Partial<RunFilters>) => {
    setFilters((f) => {
      const next = { ...f, ...change };
      if (change.graph !== undefined && change.graph !== f.graph) next.version = "";
      return next;
    });
    setCursor(null);
    setPageNo(1);
    setSelected(new Set());
  };
  const submitText = (e?: FormEvent) => {
    e?.preventDefault();
    if (draft.user !== filters.user || draft.search !== filters.search) apply({ user: draft.user.trim(), search: draft.search.trim() });
  };
  const clear = () => { setDraft({ user: "", search: "" }); apply({ ...NO_FILTERS }); };
  const go = (url: string | null, step: number) => {
    const c = cursorOf(url);
    if (!c) return;
    setCursor(c);
    setPageNo((n) => (n === null ? null : n + step));
  };
  const first = () => { setCursor(null); setPageNo(1); };

  const graph = graphs.data?.results.find((g) => String(g.id) === filters.graph);
  const versions = graph?.latest_version ? Array.from({ length: graph.latest_version }, (_, i) => graph.latest_version! - i) : [];
  const onScreen = data?.results ?? [];
  // Any run can be ticked (two of them can be compared); a bulk cancel acts on the ticked runs on
  // screen that can still be cancelled.
  const selectedHere = onScreen.filter((r) => selected.has(r.id) && cancellable(r.status));
  const ticked = [...selected];
  const compareWhyNot = compareRefusal(ticked, onScreen);
  const filtered = hasFilters(filters);

  return (
    <main className="page">
      <PageHeader title="Runs" subtitle="Every run you may read, newest first. Statuses and new runs appear as they commit." actions={
        <>
          <LiveStatus connection={connection} />
          <Button onClick={reload} disabled={loading}>Refresh</Button>
        </>
      } />
      <form className="toolbar runlist-filters" role="search" aria-label="Filter runs" onSubmit={submitText}>
        <label className="inline-field">
          <span>Search</span>
          <input type="search" placeholder="#run id or text in the input" value={draft.search} maxLength={200}
            onChange={(e) => setDraft((d) => ({ ...d, search: e.target.value }))} onBlur={() => submitText()} />
        </label>
        <label className="inline-field">
          <span>Status</span>
          <select value={filters.waiting_for ? `waiting_for:${filters.waiting_for}` : filters.status} onChange={(e) => {
            const v = e.target.value;
            apply(v.startsWith("waiting_for:") ? { status: "", waiting_for: v.slice("waiting_for:".length) } : { status: v, waiting_for: "" });
          }}>
            <option value="">All</option>
            {RUN_STATUSES.map((s) => <option key={s} value={s}>{s[0]!.toUpperCase() + s.slice(1)}</option>)}
            <option value="waiting_for:approval">Waiting at approval</option>
            <option value="waiting_for:decision">Waiting for decision (parked)</option>
          </select>
        </label>
        <label className="inline-field">
          <span>Graph</span>
          <select value={filters.graph} onChange={(e) => apply({ graph: e.target.value })}>
            <option value="">All</option>
            {filters.graph && !graph ? <option value={filters.graph}>#{filters.graph}</option> : null}
            {(graphs.data?.results ?? []).map((g) => <option key={g.id} value={String(g.id)}>{g.name}</option>)}
          </select>
        </label>
        <label className="inline-field">
          <span>Version</span>
          <select value={filters.version} disabled={!filters.graph} onChange={(e) => apply({ version: e.target.value })}
            title={filters.graph ? undefined : "Choose a graph first"}>
            <option value="">All</option>
            {filters.version && !versions.includes(Number(filters.version)) ? <option value={filters.version}>v{filters.version}</option> : null}
            {versions.map((v) => <option key={v} value={String(v)}>v{v}</option>)}
          </select>
        </label>
        <label className="inline-field">
          <span>Started by</span>
          <input type="text" placeholder="username" value={draft.user} maxLength={150} size={12}
            onChange={(e) => setDraft((d) => ({ ...d, user: e.target.value }))} onBlur={() => submitText()} />
        </label>
        <label className="inline-field">
          <span>From</span>
          <input type="date" value={filters.from} max={filters.to || undefined} onChange={(e) => apply({ from: e.target.value })} />
        </label>
        <label className="inline-field">
          <span>To</span>
          <input type="date" value={filters.to} min={filters.from || undefined} onChange={(e) => apply({ to: e.target.value })} />
        </label>
        <Button type="submit" size="small">Apply</Button>
        {filtered ? <Button variant="ghost" size="small" onClick={clear}>Clear filters</Button> : null}
        {loading && data ? <Loading label="Updating…" /> : null}
      </form>
      {data && data.results.length > 0 ? (
        <div className="toolbar runlist-bulk" aria-label="Bulk actions">
          {canOperate ? (
            <Button variant="danger-ghost" size="small" disabled={selectedHere.length === 0} onClick={() => setConfirming(true)}
              title={selectedHere.length ? undefined : "Tick runs that are queued, running or waiting"}>
              Cancel selected{selectedHere.length ? ` (${selectedHere.length})` : ""}
            </Button>
          ) : null}
          <Button size="small" disabled={compareWhyNot !== null} title={compareWhyNot ?? undefined}
            onClick={() => window.location.assign(compareUrl(ticked[0]!, ticked[1]!))}>
            {ticked.length === 2 ? `Compare #${ticked[0]} and #${ticked[1]}` : "Compare two"}
          </Button>
          {ticked.length ? <Button variant="ghost" size="small" onClick={() => setSelected(new Set())}>Clear selection ({ticked.length})</Button> : null}
          <span className="muted small">{canOperate ? "Tick runs to cancel them (queued, running or waiting) or to compare two." : "Tick two runs to compare them."}</span>
        </div>
      ) : null}
      {outcome ? (
        <div className={`alert ${outcome.refused.length ? "alert-warning" : "alert-success"}`} role="status" aria-label="Bulk cancel result">
          <strong>{outcome.summary}</strong>
          {outcome.refused.length ? (
            <ul className="runlist-refused">
              {outcome.refused.map((r) => <li key={r.run}><a href={`/runs/${r.run}/`}>#{r.run}</a>: {r.error?.message ?? "refused"}</li>)}
            </ul>
          ) : null}
          <Button variant="ghost" size="small" className="alert-close" icon aria-label="Dismiss" onClick={() => setOutcome(null)}>×</Button>
        </div>
      ) : null}
      {error ? <ErrorMessage error={error} title="The runs could not be loaded." onRetry={reload} /> : null}
      {!data && loading ? <Skeleton lines={8} variant="table" label="Loading runs…" /> : null}
      {data && data.results.length === 0 ? (
        <EmptyState title={filtered ? "No runs match these filters." : "No runs yet"} actions={filtered ? <Button onClick={clear}>Clear filters</Button> : null}>
          {filtered ? "Change or clear a filter. A search matches a run id (#42) or text in a run's input." : "Start a run from a graph's builder page, the API or `manage.py run_graph`; it is listed here as soon as it starts."}
        </EmptyState>
      ) : null}
      {data && data.results.length > 0 ? (
        <RunTable runs={data.results} selection={{ selected, allowed: () => true, onChange: setSelected }} />
      ) : null}
      {data && (data.next || data.previous || cursor) ? (
        <nav className="pager" aria-label="Pages">
          <Button size="small" disabled={cursor === null} onClick={first}>Newest</Button>
          <Button size="small" disabled={!data.previous} onClick={() => go(data.previous, -1)}>Newer</Button>
          <span className="muted">{pageNo ? `Page ${pageNo}` : "Older runs"}</span>
          <Button size="small" disabled={!data.next} onClick={() => go(data.next, 1)}>Older</Button>
        </nav>
      ) : null}
      {confirming ? (
        <BulkCancelDialog runs={selectedHere} onClose={() => setConfirming(false)} onDone={(results) => {
          setConfirming(false);
          setSelected(new Set());
          setOutcome({ summary: summarizeBulkCancel(results), refused: results.filter((r) => !r.ok) });
          reload();
        }} />
      ) : null}
    </main>
  );
}

function BulkCancelDialog({ runs, onClose, onDone }: { runs: RunSummary[]; onClose: () => void; onDone: (results: BulkCancelResult[]) => void }) {
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<unknown>(null);
  const submit = async () => {
    setBusy(true);
    setFailure(null);
    try {
      const body = await api<BulkCancel>("runs/cancel/", { method: "POST", body: { runs: runs.map((r) => r.id), reason } });
      onDone(body.results);
    } catch (err) {
      setFailure(err);
      setBusy(false);
    }
  };
  const fieldErrors = failure instanceof ApiError ? Object.entries(failure.fields) : [];
  return (
    <Modal title={`Cancel ${runs.length} run${runs.length === 1 ? "" : "s"}?`} onClose={onClose} footer={
      <>
        <Button onClick={onClose} disabled={busy}>Keep them</Button>
        <Button variant="danger" onClick={submit} disabled={busy}>{busy ? "Cancelling…" : `Cancel ${runs.length} run${runs.length === 1 ? "" : "s"}`}</Button>
      </>
    }>
      <p>Steps still running are stopped; committed steps and their spend are kept. Runs you may not cancel, or that ended meanwhile, are left as they are and listed afterwards.</p>
      <p className="muted small">{runs.map((r) => `#${r.id}`).join(", ")}</p>
      <div className="field">
        <label htmlFor="bulk-reason">Reason (optional, kept in the audit log)</label>
        <textarea id="bulk-reason" rows={2} maxLength={1000} value={reason} onChange={(e) => setReason(e.target.value)} />
      </div>
      {failure ? <ErrorMessage error={failure} title="Nothing was cancelled." /> : null}
      {fieldErrors.length ? <ul className="small">{fieldErrors.map(([k, v]) => <li key={k}>{k}: {v.join(" ")}</li>)}</ul> : null}
    </Modal>
  );
}
