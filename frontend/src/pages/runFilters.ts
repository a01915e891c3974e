// The run list's filters: read from and written to the page URL, turned into the API query, and what a bulk cancel reports.
import type { BulkCancelResult } from "../api/types";

export const RUN_STATUSES = ["queued", "running", "waiting", "succeeded", "failed", "cancelled"] as const;
/** What a live run waits for (the API's ``waiting_for``): a person at an approval gate, a decision on a step parked after a crash, or a run it called. */
export const WAITING_FOR = ["approval", "decision", "child_run"] as const;

/**
 * The filters on screen; "" means no filter. Dates are UTC days (YYYY-MM-DD), both inclusive.
 * ``waiting_for`` (one of WAITING_FOR) stands in place of a status: a parked run may still be "running".
 */
export interface RunFilters {
  status: string;
  waiting_for: string;
  graph: string;
  version: string;
  user: string;
  from: string;
  to: string;
  search: string;
}

export const NO_FILTERS: RunFilters = { status: "", waiting_for: "", graph: "", version: "", user: "", from: "", to: "", search: "" };
const KEYS = Object.keys(NO_FILTERS) as (keyof RunFilters)[];
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The filters and the page cursor in a page URL's query (``?status=failed&graph=3&cursor=...``); unknown or malformed values are dropped. */
export function filtersFromQuery(query: string): { filters: RunFilters; cursor: string | null } {
  const params = new URLSearchParams(query);
  const filters = { ...NO_FILTERS };
  for (const key of KEYS) filters[key] = (params.get(key) ?? "").trim();
  if (filters.status && !(RUN_STATUSES as readonly string[]).includes(filters.status)) filters.status = "";
  if (filters.waiting_for && !(WAITING_FOR as readonly string[]).includes(filters.waiting_for)) filters.waiting_for = "";
  if (filters.waiting_for) filters.status = "";
  for (const key of ["graph", "version"] as const) if (filters[key] && !/^\d+$/.test(filters[key])) filters[key] = "";
  if (!filters.graph) filters.version = "";
  for (const key of ["from", "to"] as const) if (filters[key] && !DAY.test(filters[key])) filters[key] = "";
  return { filters, cursor: params.get("cursor") || null };
}

/** The page URL's query for ``filters`` (and a cursor): only the filters given, in a fixed order; "" for none. */
export function queryFromFilters(filters: RunFilters, cursor: string | null = null): string {
  const params = new URLSearchParams();
  for (const key of KEYS) if (filters[key].trim()) params.set(key, filters[key].trim());
  if (cursor) params.set("cursor", cursor);
  const q = params.toString();
  return q ? `?${q}` : "";
}

/** The day after ``day`` (YYYY-MM-DD, UTC). */
export function nextDay(day: string): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10);
}

/**
 * The API path of the first page (``runs/?page_size=..&status=..``) for ``filters``: the day
 * range becomes ``created_after`` (the first day's start) and ``created_before`` (the start
 * of the day after the last), so "to" is inclusive as the date field reads.
 */
export function apiPath(filters: RunFilters, pageSize: number): string {
  const params = new URLSearchParams({ page_size: String(pageSize) });
  if (filters.status) params.set("status", filters.status);
  if (filters.waiting_for) params.set("waiting_for", filters.waiting_for);
  if (filters.graph) params.set("graph", filters.graph);
  if (filters.graph && filters.version) params.set("version", filters.version);
  if (filters.user.trim()) params.set("user", filters.user.trim());
  if (filters.from) params.set("created_after", filters.from);
  if (filters.to) params.set("created_before", nextDay(filters.to));
  if (filters.search.trim()) params.set("search", filters.search.trim());
  return `runs/?${params.toString()}`;
}

/** Whether any filter is set. */
export function hasFilters(filters: RunFilters): boolean {
  return KEYS.some((k) => filters[k].trim() !== "");
}

/** The cursor parameter of an API page link (its ``next``/``previous`` URL), or null. */
export function cursorOf(url: string | null): string | null {
  if (!url) return null;
  try {
    return new URL(url, "http://x").searchParams.get("cursor");
  } catch {
    return null;
  }
}

/** Runs in these statuses can still be cancelled. */
export function cancellable(status: string): boolean {
  return status === "queued" || status === "running" || status === "waiting";
}

/** A one-line summary of a bulk cancel: "2 cancelled; 1 refused (1 already ended)". */
export function summarizeBulkCancel(results: BulkCancelResult[]): string {
  const ok = results.filter((r) => r.ok).length;
  const refused = results.filter((r) => !r.ok);
  if (refused.length === 0) return `${ok} cancelled.`;
  const reasons: Record<string, string> = { invalid_state: "already ended", not_allowed: "not allowed", not_found: "not found" };
  const byCode = new Map<string, number>();
  for (const r of refused) {
    const code = r.error?.code ?? "error";
    byCode.set(code, (byCode.get(code) ?? 0) + 1);
  }
  const parts = [...byCode].map(([code, n]) => `${n} ${reasons[code] ?? code}`);
  return `${ok} cancelled; ${refused.length} refused (${parts.join(", ")}).`;
}

/**
 * Why the ticked runs cannot be compared, or null when they can: two runs, of one graph
 * where both are on screen (a run ticked on another page is left to the server, which
 * refuses two graphs with a 400).
 */
export function compareRefusal(ticked: number[], onScreen: { id: number; graph: number }[]): string | null {
  if (ticked.length !== 2) return "Tick two runs of one graph";
  const [a, b] = ticked.map((id) => onScreen.find((r) => r.id === id));
  if (a && b && a.graph !== b.graph) return `#${a.id} and #${b.id} are runs of different graphs`;
  return null;
}
