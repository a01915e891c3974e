// /costs/: spend of the runs the user may read: totals, by day, by graph/node/model, costliest runs and steps, budgets, CSV.
import type { BudgetRow, CostRow, CostTotals, GraphSummary, Page } from "../api/types";
import { useEffect, useMemo, useState } from "react";
import { API_ROOT } from "../lib/api";
import { BarChart } from "../shell/BarChart";
import { formatSpend, formatUsd } from "../shell/format";
import { graphUrl, runUrl } from "../shell/graphLinks";
import { EmptyState, ErrorMessage, Loading, PageHeader, Skeleton, StatusBadge } from "../shell/ui";
import { useApi, type ApiState } from "../shell/useApi";
import { axisUsd, breakdownSeries, budgetShare, COLORS, daySeries, filterQuery, filtersFromSearch, lastDays, rowName, withFilters, type CostFilters } from "./costs/model";
import "./costs/costs.css";
import { Button, ButtonLink } from "../shell/Button";

const GROUPS = [
  { id: "graph", label: "Graph" },
  { id: "node", label: "Node" },
  { id: "model", label: "Model" },
] as const;
type Group = (typeof GROUPS)[number]["id"];
const TOP = 12;

/** A link that downloads the cost rows of ``group`` under the page's filters as CSV. */
function ExportLink({ filters, group, label = "Export CSV" }: { filters: CostFilters; group: string; label?: string }) {
  const href = API_ROOT + withFilters("costs/export/", filters, { group_by: group, order: group === "day" ? "key" : "-cost_usd" });
  return <ButtonLink size="small" href={href} download>{label}</ButtonLink>;
}

/** A section's loading / error / content, the same way in every card. */
function Section<T>({ state, what, children }: { state: ApiState<T>; what: string; children: (data: T) => React.ReactNode }) {
  if (state.error) return <ErrorMessage error={state.error} title={`The ${what} could not be loaded.`} onRetry={state.reload} />;
  if (state.data === undefined) return <Skeleton lines={4} variant="table" label={`Loading ${what}…`} />;
  return <>{children(state.data)}</>;
}

const attempts = (n: number, what = "") => `${n.toLocaleString("en-US")} attempt${n === 1 ? "" : "s"}${what}`;

/** A spend figure, with a trailing "+ unknown" set smaller (the priced part is the number people read). */
function SpendFigure({ text }: { text: string }) {
  const at = text.indexOf(" + unknown");
  if (at < 0) return <>{text}</>;
  return <>{text.slice(0, at)} <span className="plus-unknown">+ unknown</span></>;
}

function Totals({ t }: { t: CostTotals }) {
  const stats = [
    { id: "total", raw: t.cost_usd, title: "Total spend", value: formatSpend(t.cost_usd, t.unpriced_attempts, t.attempts), note: attempts(t.attempts) },
    { id: "first", raw: t.first_cost_usd, title: "First attempts", value: formatSpend(t.first_cost_usd, t.first_unpriced_attempts, t.first_attempts), note: attempts(t.first_attempts), color: COLORS.first },
    { id: "retry", raw: t.retry_cost_usd, title: "Retries", value: formatSpend(t.retry_cost_usd, t.retry_unpriced_attempts, t.retry_attempts), note: attempts(t.retry_attempts, " after a failure"), color: COLORS.retry },
    { id: "crash", raw: t.crash_rerun_cost_usd, title: "Crash re-runs", value: formatSpend(t.crash_rerun_cost_usd, t.crash_rerun_unpriced_attempts, t.crash_rerun_attempts), note: attempts(t.crash_rerun_attempts, " after a worker died"), color: COLORS.crash },
    { id: "tokens", title: "Tokens", value: (t.input_tokens + t.output_tokens).toLocaleString("en-US"), note: `${t.input_tokens.toLocaleString("en-US")} in (${t.cached_input_tokens.toLocaleString("en-US")} cached) · ${t.output_tokens.toLocaleString("en-US")} out` },
    { id: "unpriced", title: "Unknown price", value: attempts(t.unpriced_attempts), note: t.unpriced_attempts ? "Not in the sums: their models have no known price" : "Every attempt has a price" },
  ];
  return (
    <dl className="stats" aria-label="Totals">
      {stats.map((s) => (
        <div key={s.id} className={`stat${s.id === "unpriced" && t.unpriced_attempts ? " stat-warn" : ""}`} data-stat={s.id}>
          <dt>{s.color ? <span className="swatch" style={{ background: s.color }} aria-hidden="true" /> : null}{s.title}</dt>
          {/* data-usd: the exact priced sum behind the rounded figure (what a test compares with the database). */}
          <dd data-usd={"raw" in s ? s.raw : undefined}><SpendFigure text={s.value} /></dd>
          <dd className="stat-note muted">{s.note}</dd>
        </div>
      ))}
    </dl>
  );
}

/** A table of cost rows: name (linked), spend, retries, crash re-runs, attempts, tokens. */
function CostTable({ group, rows, caption, compact = false }: { group: string; rows: CostRow[]; caption: string; compact?: boolean }) {
  const link = (r: CostRow): string | null => {
    if (group === "graph") return graphUrl(Number(r.key));
    if (group === "node" && r.graph) return graphUrl(r.graph);
    if (group === "run") return runUrl(Number(r.key));
    if (group === "step" && r.run) return runUrl(r.run);
    return null;
  };
  return (
    <div className="table-wrap">
      <table className="table table-compact">
        <caption className="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">{GROUPS.find((g) => g.id === group)?.label ?? (group === "run" ? "Run" : "Step")}</th>
            <th scope="col" className="num">Spend</th>
            <th scope="col" className="num">Retries</th>
            <th scope="col" className="num">{compact ? "Re-runs" : "Crash re-runs"}</th>
            <th scope="col" className="num">Attempts</th>
            {compact ? null : <th scope="col" className="num">Tokens in / out</th>}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => {
            const href = link(r);
            const name = rowName(group, r);
            return (
              <tr key={`${r.graph ?? ""}:${r.key}`}>
                <td className="name-cell">{href ? <a href={href}>{name}</a> : name}</td>
                <td className="num">{formatSpend(r.cost_usd, r.unpriced_attempts, r.attempts)}</td>
                <td className="num">{r.retry_attempts ? formatSpend(r.retry_cost_usd, r.retry_unpriced_attempts, r.retry_attempts) : "—"}</td>
                <td className="num">{r.crash_rerun_attempts ? formatSpend(r.crash_rerun_cost_usd, r.crash_rerun_unpriced_attempts, r.crash_rerun_attempts) : "—"}</td>
                <td className="num">{r.attempts.toLocaleString("en-US")}</td>
                {compact ? null : <td className="num">{r.input_tokens.toLocaleString("en-US")} / {r.output_tokens.toLocaleString("en-US")}</td>}
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function Budgets({ rows }: { rows: BudgetRow[] }) {
  if (rows.length === 0) {
    return (
      <EmptyState title="No run in this range had a budget">
        Give a graph a budget in its run settings (budget in USD per run); the runtime stops a run before a step would exceed it, and this table shows how close runs came.
      </EmptyState>
    );
  }
  return (
    <div className="table-wrap">
      <table className="table table-compact">
        <caption className="visually-hidden">Spend against budgets, per graph</caption>
        <thead>
          <tr>
            <th scope="col">Graph</th>
            <th scope="col" className="num">Budget per run</th>
            <th scope="col" className="num">Runs</th>
            <th scope="col" className="num">Spent</th>
            <th scope="col">Costliest run against its budget</th>
            <th scope="col" className="num">At 80% or more</th>
            <th scope="col" className="num">Stopped by budget</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((b) => {
            const share = budgetShare(b.max_run_cost_usd, b.budget_usd);
            const pct = share === null ? null : Math.round(share * 100);
            return (
              <tr key={b.graph}>
                <td><a href={graphUrl(b.graph)}>{b.label}</a></td>
                <td className="num">{formatUsd(b.budget_usd)}</td>
                <td className="num">{b.runs}</td>
                <td className="num">{formatUsd(b.cost_usd)}</td>
                <td>
                  {pct === null ? "—" : (
                    <div className="budget-bar" title={`${formatUsd(b.max_run_cost_usd)} of ${formatUsd(b.budget_usd)}`}>
                      <div className="budget-track" role="meter" aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.min(pct, 100)}
                        aria-label={`${b.label}: costliest run used ${pct}% of its budget`}>
                        <div className={`budget-fill${pct >= 80 ? " budget-hot" : ""}`} style={{ width: `${Math.min(pct, 100)}%` }} />
                      </div>
                      <span className="budget-pct">{formatUsd(b.max_run_cost_usd)} · {pct}%</span>
                    </div>
                  )}
                </td>
                <td className="num">{b.near_budget}</td>
                <td className="num">{b.stopped_by_budget ? <StatusBadge status="failed" label={String(b.stopped_by_budget)} /> : 0}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export default function Costs() {
  const [filters, setFilters] = useState<CostFilters>(() => filtersFromSearch(window.location.search));
  const [group, setGroup] = useState<Group>("graph");
  useEffect(() => {
    const q = filterQuery(filters);
    window.history.replaceState(null, "", q ? `?${q}` : window.location.pathname);
  }, [filters]);

  const totals = useApi<CostTotals>(withFilters("costs/totals/", filters));
  const days = useApi<Page<CostRow>>(withFilters("costs/", filters, { group_by: "day", page_size: "500" }));
  const breakdown = useApi<Page<CostRow>>(withFilters("costs/", filters, { group_by: group, order: "-cost_usd", page_size: String(TOP) }));
  const runs = useApi<Page<CostRow>>(withFilters("costs/", filters, { group_by: "run", order: "-cost_usd", page_size: "10" }));
  const steps = useApi<Page<CostRow>>(withFilters("costs/", filters, { group_by: "step", order: "-cost_usd", page_size: "10" }));
  const budgets = useApi<BudgetRow[]>(withFilters("costs/budgets/", filters));
  const graphs = useApi<Page<GraphSummary>>("graphs/?page_size=500");
  const all = [totals, days, breakdown, runs, steps, budgets];
  const busy = all.some((s) => s.loading);
  const reloadAll = () => all.forEach((s) => s.reload());

  const dayChart = useMemo(() => (days.data ? daySeries(days.data.results, filters) : null), [days.data, filters]);
  const groupChart = useMemo(() => (breakdown.data ? breakdownSeries(group, breakdown.data.results) : null), [breakdown.data, group]);
  const set = (patch: Partial<CostFilters>) => setFilters((f) => ({ ...f, ...patch }));
  const preset = (n: number | null) => setFilters((f) => (n === null ? { since: "", until: "", graph: f.graph } : { ...lastDays(n), graph: f.graph }));
  const isPreset = (n: number) => { const p = lastDays(n); return filters.since === p.since && filters.until === p.until; };
  const empty = totals.data !== undefined && totals.data.attempts === 0;
  const rangeText = filters.since || filters.until ? `${filters.since || "the start"} to ${filters.until || "today"} (UTC days)` : "all time";

  return (
    <main className="page costs-page">
      <PageHeader
        title="Costs"
        subtitle="What the runs you may read spent on model calls, every attempt counted. A model with no known price shows as unknown, never as $0."
        actions={<Button onClick={reloadAll} disabled={busy}>Refresh</Button>}
      />
      <form className="toolbar costs-filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <label className="inline-field">
          <span>From</span>
          <input type="date" value={filters.since} max={filters.until || undefined} onChange={(e) => set({ since: e.target.value })} />
        </label>
        <label className="inline-field">
          <span>To</span>
          <input type="date" value={filters.until} min={filters.since || undefined} onChange={(e) => set({ until: e.target.value })} />
        </label>
        <div className="segmented" role="group" aria-label="Range">
          <Button size="small" onClick={() => preset(7)} aria-pressed={isPreset(7)}>Last 7 days</Button>
          <Button size="small" onClick={() => preset(30)} aria-pressed={isPreset(30)}>Last 30 days</Button>
          <Button size="small" onClick={() => preset(null)} aria-pressed={!filters.since && !filters.until}>All time</Button>
        </div>
        <label className="inline-field">
          <span>Graph</span>
          <select value={filters.graph} onChange={(e) => set({ graph: e.target.value })}>
            <option value="">All graphs</option>
            {(graphs.data?.results ?? []).map((g) => <option key={g.id} value={String(g.id)}>{g.name}</option>)}
          </select>
        </label>
        {busy && totals.data ? <Loading label="Updating…" /> : null}
      </form>

      <Section state={totals} what="totals">{(t) => (t.attempts > 0 ? <Totals t={t} /> : null)}</Section>

      {empty ? (
        <EmptyState title="No spend in this range">
          Runs whose nodes call a model (llm, agent) record what each attempt cost; none of the runs you may read did from {rangeText}. Choose another range, or All time.
        </EmptyState>
      ) : (
        <>
          <section className="card" aria-labelledby="costs-by-day">
            <div className="card-head">
              <h2 id="costs-by-day">Spend by day</h2>
              <ExportLink filters={filters} group="day" />
            </div>
            <Section state={days} what="daily spend">
              {() => dayChart && <BarChart title={`Spend by day, ${rangeText}: first attempts, retries and crash re-runs stacked`} labels={dayChart.labels} series={dayChart.series} stacked format={axisUsd} />}
            </Section>
          </section>

          <section className="card" aria-labelledby="costs-breakdown">
            <div className="card-head">
              <h2 id="costs-breakdown">Spend by {group}</h2>
              <div className="toolbar">
                <div className="segmented" role="group" aria-label="Break down by">
                  {GROUPS.map((g) => (
                    <Button key={g.id} size="small" aria-pressed={group === g.id} onClick={() => setGroup(g.id)}>{g.label}</Button>
                  ))}
                </div>
                <ExportLink filters={filters} group={group} />
              </div>
            </div>
            <Section state={breakdown} what={`spend by ${group}`}>
              {(page) => (
                <div className="breakdown">
                  {groupChart && page.results.length > 0 ? (
                    <BarChart title={`Spend by ${group}, costliest first`} labels={groupChart.labels} series={groupChart.series} stacked horizontal
                      format={axisUsd} height={Math.max(160, 34 * page.results.length + 60)} />
                  ) : null}
                  <CostTable group={group} rows={page.results} caption={`Spend by ${group}`} />
                  {page.count > page.results.length ? (
                    <p className="muted table-note">The {page.results.length} costliest of {page.count}; the CSV has them all.</p>
                  ) : null}
                </div>
              )}
            </Section>
          </section>

          <div className="costs-grid">
            <section className="card" aria-labelledby="costs-runs">
              <div className="card-head">
                <h2 id="costs-runs">Most expensive runs</h2>
                <ExportLink filters={filters} group="run" />
              </div>
              <Section state={runs} what="runs">{(page) => <CostTable group="run" rows={page.results} caption="Most expensive runs" compact />}</Section>
            </section>
            <section className="card" aria-labelledby="costs-steps">
              <div className="card-head">
                <h2 id="costs-steps">Most expensive steps</h2>
                <ExportLink filters={filters} group="step" />
              </div>
              <Section state={steps} what="steps">{(page) => <CostTable group="step" rows={page.results} caption="Most expensive steps" compact />}</Section>
            </section>
          </div>
        </>
      )}

      <section className="card" aria-labelledby="costs-budgets">
        <div className="card-head">
          <h2 id="costs-budgets">Budgets</h2>
          <span className="muted">Runs created {rangeText} that carried a budget</span>
        </div>
        <Section state={budgets} what="budgets">{(rows) => <Budgets rows={rows} />}</Section>
      </section>
      <p className="muted costs-foot">
        Retries: attempts that follow a failed attempt of the same step. Crash re-runs: attempts that follow one whose worker died (its call may
        have been billed, but never committed). Days are UTC.
      </p>
    </main>
  );
}
