import type { CostRow } from "../../api/types";
import { breakdownSeries, budgetShare, daySeries, daysBetween, filterQuery, filtersFromSearch, lastDays, rowName, withFilters } from "./model";
import { auditFiltersFromSearch, auditQuery } from "../Audit";

const row = (key: string, cost: string, retry = "0", crash = "0", extra: Partial<CostRow> = {}): CostRow => ({
  key, label: "", cost_usd: cost, unpriced_attempts: 0, input_tokens: 0, output_tokens: 0, cached_input_tokens: 0, cache_write_tokens: 0, attempts: 1,
  retry_cost_usd: retry, retry_attempts: 0, retry_unpriced_attempts: 0, crash_rerun_cost_usd: crash, crash_rerun_attempts: 0,
  crash_rerun_unpriced_attempts: 0, ...extra,
});

describe("cost filters", () => {
  const today = new Date("2026-12-02T23:30:00Z");
  it("default to the last 30 UTC days and round-trip through the query string", () => {
    const f = filtersFromSearch("", today);
    expect(f).toEqual({ since: "2026-11-03", until: "2026-12-02", graph: "" });
    expect(filtersFromSearch(`?${filterQuery({ ...f, graph: "4" })}`, today)).toEqual({ ...f, graph: "4" });
    expect(filtersFromSearch("?since=&until=", today)).toEqual({ since: "", until: "", graph: "" });
    expect(filtersFromSearch("?since=yesterday&until=2026-12-01", today)).toEqual({ since: "", until: "2026-12-01", graph: "" });
    expect(lastDays(7, today).since).toBe("2026-11-26");
  });
  it("build API paths with the filters and extra parameters", () => {
    expect(withFilters("costs/", { since: "2026-12-01", until: "", graph: "" }, { group_by: "day" })).toBe("costs/?since=2026-12-01&group_by=day");
    expect(withFilters("costs/totals/", { since: "", until: "", graph: "" })).toBe("costs/totals/");
  });
});

describe("cost charts", () => {
  it("fill every day of a closed range, with first attempts, retries and crash re-runs apart", () => {
    expect(daysBetween("2026-11-30", "2026-12-02")).toEqual(["2026-11-30", "2026-12-01", "2026-12-02"]);
    expect(daysBetween("", "2026-12-02")).toEqual([]);
    const { labels, series } = daySeries([row("2026-12-01", "0.5", "0.1", "0.15")], { since: "2026-11-30", until: "2026-12-02", graph: "" });
    expect(labels).toHaveLength(3);
    expect(series.map((s) => s.name)).toEqual(["First attempts", "Retries", "Crash re-runs"]);
    expect(series[0]!.values).toEqual([0, 0.25, 0]);
    expect(series[1]!.values).toEqual([0, 0.1, 0]);
    expect(series[2]!.values).toEqual([0, 0.15, 0]);
  });
  it("show only the days with spend for an open range", () => {
    expect(daySeries([row("2026-10-01", "1")], { since: "", until: "", graph: "" }).labels).toEqual(["2026-10-01"]);
  });
  it("name breakdown rows by their group", () => {
    expect(rowName("node", row("ask", "1", "0", "0", { label: "alpha" }))).toBe("alpha · ask");
    expect(rowName("model", row("gpt-4o", "1", "0", "0", { label: "openai" }))).toBe("gpt-4o (openai)");
    expect(rowName("step", row("12", "1", "0", "0", { label: "ask", run: 3 }))).toBe("ask (run #3)");
    expect(breakdownSeries("graph", [row("1", "2", "1", "0", { label: "alpha" })]).labels).toEqual(["alpha"]);
  });
  it("give a budget share only with a budget", () => {
    expect(budgetShare("0.8", "1")).toBeCloseTo(0.8);
    expect(budgetShare("0.8", "0")).toBeNull();
  });
});

describe("audit filters", () => {
  it("keep only the filters that are set, trimmed, in the query", () => {
    const f = auditFiltersFromSearch("?action=run.start&actor=%20ada%20&bogus=1");
    expect(auditQuery(f)).toBe("actor=ada&action=run.start");
    expect(auditQuery(f, { kind: "jsonl" })).toBe("actor=ada&action=run.start&kind=jsonl");
  });
});
