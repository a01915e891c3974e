// The audit page names graph versions by graph and number (v3), keeping the chained id in the link's title.
import { screen, within } from "@testing-library/react";
import { cursorPage, makeContext, renderWith, stubFetch } from "../shell/testing";
import type { AuditEntry } from "../api/types";
import Audit, { auditCells, versionHref } from "./Audit";

afterEach(() => vi.unstubAllGlobals());

const version = { id: 17, number: 3, graph: 4, graph_name: "triage", is_test: false };
const entry = (over: Partial<AuditEntry>): AuditEntry => ({
  id: 1, created_at: "2026-12-01T10:00:00Z", actor_type: "user", actor: "bea", action: "graph.publish", object_type: "graphversion",
  object_id: "17", data: { graph: 4, number: 3, message: "" }, scope: "graph:4", seq: 2, prev_hash: "a".repeat(64), hash: "b".repeat(64),
  version, ...over,
});

describe("Audit", () => {
  it("shows a published version as its graph and number, with the id in the title", async () => {
    const started = entry({ id: 2, action: "run.start", object_type: "run", object_id: "42", data: { graph_version: 17 }, scope: "run:42", seq: 0 });
    stubFetch({
      "GET /api/v1/audit/": () => ({ body: cursorPage([entry({}), started]) }),
      "GET /api/v1/audit/facets/": () => ({ body: { action: [], actor_type: [], object_type: [] } }),
      "GET /api/v1/audit/verify/": () => ({ body: { ok: true, entries: 2, chains: 2, problems: [], scope: null, verified_at: "2026-12-01T10:00:00Z", seconds: 0.01 } }),
    });
    renderWith(<Audit />, makeContext({}, "audit"));
    const table = await screen.findByRole("table", { name: "Audit entries" });
    const links = within(table).getAllByRole("link", { name: "triage v3" });
    expect(links).toHaveLength(2); // the publish's object, the run start's details
    expect(links[0]!.getAttribute("href")).toBe("/graphs/4/?version=3");
    expect(links[0]!.getAttribute("title")).toBe("graph version id 17");
    expect(table.textContent).not.toContain("graphversion 17");
    expect(table.textContent).not.toContain('"graph_version":17');
  });

  it("leaves entries that name no version, or a deleted one, as they are", () => {
    const plain = entry({ action: "graph.save", object_type: "graph", object_id: "4", data: { revision: 2 }, version: null });
    expect(auditCells(plain)).toEqual({ version: null, objectIsVersion: false, details: '{"revision":2}' });
    const gone = entry({ action: "run.start", object_type: "run", object_id: "42", data: { graph_version: 17 }, version: null });
    expect(auditCells(gone).details).toBe('{"graph_version":17}');
    expect(auditCells(entry({ version: { ...version, number: 0, is_test: true } })).version?.is_test).toBe(true);
  });
});

describe("versionHref", () => {
  it("opens a published version read-only, and a node-test snapshot (no version to open) in the graph's builder", () => {
    expect(versionHref(version)).toBe("/graphs/4/?version=3");
    const snapshot = { id: 18, number: 0, graph: 4, graph_name: "triage", is_test: true };
    expect(versionHref(snapshot)).toBe("/graphs/4/");
  });
});
