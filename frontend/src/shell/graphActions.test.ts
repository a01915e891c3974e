import { exportFileName, ImportFailed, importedText, importedUrl, importGraphFile, inDocumentOrder } from "./graphActions";
import { stubFetch } from "./testing";

afterEach(() => vi.unstubAllGlobals());

const file = (name: string, text: string) => new File([text], name, { type: "application/json" });

describe("after an import", () => {
  const result = { graph: 4, name: "Refund agent", version: 3, created: true, draft_kept: false };

  it("opens the draft, which now holds the file", () => {
    expect(importedUrl(result)).toBe("/graphs/4/");
    expect(importedText(result)).toBe("Imported “Refund agent” as version 3.");
  });

  it("opens the imported version when the draft kept its unpublished edits, and says so", () => {
    const kept = { ...result, draft_kept: true };
    expect(importedUrl(kept)).toBe("/graphs/4/?version=3");
    expect(importedText(kept)).toBe("Imported “Refund agent” as version 3. Its draft has unpublished edits, so it was left as it was.");
    expect(importedText({ ...kept, created: false })).toBe("“Refund agent” is unchanged: version 3 has the same content. Its draft has unpublished edits, so it was left as it was.");
  });
});

describe("inDocumentOrder", () => {
  it("orders each section's paths as in the file, sections as first reported", () => {
    const p = (path: string) => ({ path, message: path });
    const sorted = inDocumentOrder([p("nodes[3].config.set"), p("edges[0].target"), p("nodes[10].id"), p("nodes[1].kind"), p("nodes[1].config"), p("")]);
    expect(sorted.map((x) => x.path)).toEqual(["nodes[1].config", "nodes[1].kind", "nodes[3].config.set", "nodes[10].id", "edges[0].target", ""]);
  });
});

describe("importGraphFile", () => {
  it("refuses a file that is not JSON without calling the server", async () => {
    const calls = stubFetch({});
    const err = await importGraphFile(file("x.json", "{nope")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImportFailed);
    expect((err as ImportFailed).message).toBe("x.json is not valid JSON.");
    expect(calls).toHaveLength(0);
  });

  it("refuses JSON that is not an object", async () => {
    stubFetch({});
    const err = (await importGraphFile(file("list.json", "[1, 2]")).catch((e: unknown) => e)) as ImportFailed;
    expect(err.problems).toEqual([{ path: "", message: "The file must hold one JSON object (a graph spec)." }]);
  });

  it("lists the server's validation issues by path", async () => {
    stubFetch({
      "POST /api/v1/graphs/import/": () => ({
        status: 400,
        body: {
          error: {
            code: "graph_invalid", message: "The graph spec is not valid.", fields: { "nodes.x.kind": ["Unknown kind."] },
            issues: [
              { node_id: "x", field: "kind", message: "Unknown node kind 'nope'.", code: "unknown_kind" },
              { node_id: "y", field: "config.x", path: "nodes[2].config.x", message: "Required.", code: "invalid" },
              { node_id: null, field: "edges", message: "No path from start to end.", code: "unreachable" },
            ],
          },
        },
      }),
    });
    const err = (await importGraphFile(file("g.json", '{"name": "g", "nodes": [], "edges": []}')).catch((e: unknown) => e)) as ImportFailed;
    expect(err.message).toBe("g.json was not imported: The graph spec is not valid.");
    expect(err.problems).toEqual([
      { path: "nodes.x.kind", message: "Unknown node kind 'nope'.", node: "x" },
      { path: "nodes[2].config.x", message: "Required.", node: "y" },
      { path: "edges", message: "No path from start to end." },
    ]);
  });

  it("falls back to the error's fields and posts the spec with the CSRF header", async () => {
    const calls = stubFetch({
      "POST /api/v1/graphs/import/": () => ({ status: 400, body: { error: { code: "invalid", message: "Invalid input.", fields: { name: ["Required."] } } } }),
    });
    const err = (await importGraphFile(file("g.json", '{"nodes": []}')).catch((e: unknown) => e)) as ImportFailed;
    expect(err.problems).toEqual([{ path: "name", message: "Required." }]);
    expect(calls[0]!.body).toEqual({ nodes: [] });
    expect(calls[0]!.headers).toHaveProperty("X-CSRFToken");
  });

  it("returns what the server saved", async () => {
    stubFetch({ "POST /api/v1/graphs/import/": () => ({ status: 201, body: { graph: 4, name: "g", version: 1, created: true } }) });
    await expect(importGraphFile(file("g.json", '{"name": "g"}'))).resolves.toEqual({ graph: 4, name: "g", version: 1, created: true });
  });
});

describe("exportFileName", () => {
  it("slugs the graph's name", () => {
    expect(exportFileName("Support Triage (v2)")).toBe("support-triage-v2.json");
    expect(exportFileName("!!!")).toBe("graph.json");
  });
});
