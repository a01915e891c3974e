import { apiPath, compareRefusal, cursorOf, filtersFromQuery, hasFilters, NO_FILTERS, queryFromFilters, summarizeBulkCancel } from "./runFilters";

describe("run list filters", () => {
  it("round-trips through the page URL, dropping what is malformed", () => {
    const { filters, cursor } = filtersFromQuery("?status=failed&graph=3&version=2&user=olu&from=2026-12-01&to=2026-12-02&search=A-1&cursor=cD0xMA%3D%3D");
    expect(filters).toEqual({ status: "failed", waiting_for: "", graph: "3", version: "2", user: "olu", from: "2026-12-01", to: "2026-12-02", search: "A-1" });
    expect(cursor).toBe("cD0xMA==");
    expect(queryFromFilters(filters, cursor)).toBe("?status=failed&graph=3&version=2&user=olu&from=2026-12-01&to=2026-12-02&search=A-1&cursor=cD0xMA%3D%3D");
    const bad = filtersFromQuery("?status=exploded&graph=x&version=2&from=yesterday");
    expect(bad.filters).toEqual(NO_FILTERS); // a version without its graph means nothing
    expect(queryFromFilters(NO_FILTERS)).toBe("");
    expect(hasFilters(NO_FILTERS)).toBe(false);
  });

  it("reads what a run waits for in place of a status", () => {
    const { filters } = filtersFromQuery("?status=running&waiting_for=decision");
    expect(filters).toEqual({ ...NO_FILTERS, waiting_for: "decision" });
    expect(queryFromFilters(filters)).toBe("?waiting_for=decision");
    expect(apiPath(filters, 50)).toBe("runs/?page_size=50&waiting_for=decision");
    expect(filtersFromQuery("?waiting_for=lunch").filters).toEqual(NO_FILTERS);
  });

  it("asks the API for the day range with the last day inclusive", () => {
    const f = { ...NO_FILTERS, from: "2026-12-01", to: "2026-12-31", search: " #42 ", graph: "3", version: "1" };
    expect(apiPath(f, 50)).toBe("runs/?page_size=50&graph=3&version=1&created_after=2026-12-01&created_before=2027-01-01&search=%2342");
    expect(apiPath({ ...NO_FILTERS, version: "2" }, 10)).toBe("runs/?page_size=10"); // no graph: no version
  });

  it("reads the cursor of an API page link", () => {
    expect(cursorOf("http://testserver/api/v1/runs/?cursor=abc%3D&page_size=50&status=failed")).toBe("abc=");
    expect(cursorOf(null)).toBeNull();
    expect(cursorOf("/api/v1/runs/?page_size=50")).toBeNull();
  });

  it("summarises a bulk cancel with the reasons for each refusal", () => {
    const ok = { ok: true, status: "cancelled" as const, error: null };
    expect(summarizeBulkCancel([{ run: 1, ...ok }, { run: 2, ...ok }])).toBe("2 cancelled.");
    expect(summarizeBulkCancel([
      { run: 1, ...ok },
      { run: 2, ok: false, status: "succeeded", error: { code: "invalid_state", message: "ended" } },
      { run: 3, ok: false, status: "waiting", error: { code: "not_allowed", message: "no" } },
      { run: 4, ok: false, status: "failed", error: { code: "invalid_state", message: "ended" } },
    ])).toBe("1 cancelled; 3 refused (2 already ended, 1 not allowed).");
  });
});

describe("compareRefusal", () => {
  const rows = [{ id: 1, graph: 7 }, { id: 2, graph: 7 }, { id: 3, graph: 8 }];
  it("asks for two runs", () => {
    expect(compareRefusal([1], rows)).toBe("Tick two runs of one graph");
    expect(compareRefusal([1, 2, 3], rows)).toBe("Tick two runs of one graph");
  });
  it("allows two runs of one graph", () => {
    expect(compareRefusal([1, 2], rows)).toBeNull();
  });
  it("refuses two graphs, naming the runs", () => {
    expect(compareRefusal([1, 3], rows)).toBe("#1 and #3 are runs of different graphs");
  });
  it("leaves a run ticked on another page to the server", () => {
    expect(compareRefusal([1, 99], rows)).toBeNull();
  });
});
