// The cost page's data: API row types, filters <-> query strings, days filled in, chart series.
import type { CostRow } from "../../api/types";
import { STATUS_TOKENS } from "../../lib/statusTokens";
import type { BarSeries } from "../../shell/BarChart";

/** The page's filters: UTC days (YYYY-MM-DD, inclusive; "" = open) and a graph id ("" = all). */
export interface CostFilters {
  since: string;
  until: string;
  graph: string;
}

/** Spend by kind of attempt: first attempts in the app's accent; retries and crash re-runs in the status colours of a retrying and an interrupted step (lib/statusTokens). */
export const COLORS = { first: "#2f6fed", retry: STATUS_TOKENS.retrying.accent, crash: STATUS_TOKENS.interrupted.accent } as const;

/** A UTC day as YYYY-MM-DD. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** The last ``days`` UTC days up to ``today`` (inclusive). */
export function lastDays(days: number, today: Date = new Date()): CostFilters {
  const start = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (days - 1)));
  return { since: utcDay(start), until: utcDay(today), graph: "" };
}

/** The query string of the filters (without "?"), keys in a fixed order. */
export function filterQuery(f: CostFilters): string {
  const params = new URLSearchParams();
  if (f.since) params.set("since", f.since);
  if (f.until) params.set("until", f.until);
  if (f.graph) params.set("graph", f.graph);
  return params.toString();
}

/** Filters from a location's search string; no range given: the last 30 days. */
export function filtersFromSearch(search: string, today: Date = new Date()): CostFilters {
  const params = new URLSearchParams(search);
  const day = (v: string | null) => (v && /^\d{4}-\d{2}-\d{2}$/.test(v) ? v : "");
  if (!params.has("since") && !params.has("until")) return { ...lastDays(30, today), graph: params.get("graph") ?? "" };
  return { since: day(params.get("since")), until: day(params.get("until")), graph: params.get("graph") ?? "" };
}

/** ``path?query&extra`` with the filters' query and extra parameters. */
export function withFilters(path: string, f: CostFilters, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams(filterQuery(f));
  for (const [k, v] of Object.entries(extra)) params.set(k, v);
  const q = params.toString();
  return q ? `${path}?${q}` : path;
}

/** Every day from ``since`` to ``until`` (inclusive), at most 366; [] when either is open. */
export function daysBetween(since: string, until: string): string[] {
  if (!since || !until) return [];
  const out: string[] = [];
  const d = new Date(`${since}T00:00:00Z`);
  const end = new Date(`${until}T00:00:00Z`);
  while (d <= end && out.length < 366) {
    out.push(utcDay(d));
    d.setUTCDate(d.getUTCDate() + 1);
  }
  return out;
}

const num = (v: string | number | undefined) => Number(v ?? 0);

/** The spend of first attempts of a row: its priced sum less retries and crash re-runs. */
export function firstCost(row: CostRow): number {
  return num(row.cost_usd) - num(row.retry_cost_usd) - num(row.crash_rerun_cost_usd);
}

/**
 * The day chart: one label per day of the range (days with no spend show as 0, so gaps are
 * visible; an open range shows only days with spend), and the spend of first attempts,
 * retries and crash re-runs stacked.
 */
export function daySeries(rows: CostRow[], f: CostFilters): { labels: string[]; series: BarSeries[] } {
  const byDay = new Map(rows.map((r) => [r.key, r]));
  const labels = daysBetween(f.since, f.until);
  const days = labels.length ? labels : rows.map((r) => r.key);
  const pick = (fn: (r: CostRow) => number) => days.map((d) => { const r = byDay.get(d); return r ? fn(r) : 0; });
  return {
    labels: days,
    series: [
      { name: "First attempts", color: COLORS.first, values: pick(firstCost) },
      { name: "Retries", color: COLORS.retry, values: pick((r) => num(r.retry_cost_usd)) },
      { name: "Crash re-runs", color: COLORS.crash, values: pick((r) => num(r.crash_rerun_cost_usd)) },
    ],
  };
}

/** A breakdown row's name: a graph's name, "graph · node", a model (with its provider), a run, a step. */
export function rowName(group: string, row: CostRow): string {
  if (group === "node") return `${row.label} · ${row.key}`;
  if (group === "model") return row.key ? (row.label ? `${row.key} (${row.label})` : row.key) : "(no model)";
  if (group === "run") return `#${row.key} ${row.label}`;
  if (group === "step") return `${row.label} (run #${row.run ?? "?"})`;
  return row.label || row.key;
}

/** The breakdown chart: the rows' spend split into first attempts, retries and crash re-runs. */
export function breakdownSeries(group: string, rows: CostRow[]): { labels: string[]; series: BarSeries[] } {
  return {
    labels: rows.map((r) => rowName(group, r)),
    series: [
      { name: "First attempts", color: COLORS.first, values: rows.map(firstCost) },
      { name: "Retries", color: COLORS.retry, values: rows.map((r) => num(r.retry_cost_usd)) },
      { name: "Crash re-runs", color: COLORS.crash, values: rows.map((r) => num(r.crash_rerun_cost_usd)) },
    ],
  };
}

/** A chart axis value in dollars: "$0", "$0.0012", "$3.50". */
export function axisUsd(value: number): string {
  if (value === 0) return "$0";
  if (Math.abs(value) >= 1) return `$${value.toFixed(2)}`;
  return `$${Number(value.toPrecision(2))}`;
}

/** Spend as a share of a budget, 0..∞ (1 = the whole budget); null without a budget. */
export function budgetShare(cost: string, budget: string): number | null {
  const b = Number(budget);
  return b > 0 ? Number(cost) / b : null;
}
