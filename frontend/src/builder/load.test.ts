// The builder's opening fetches: started once by the entry, taken by the page, in parallel.
import { afterEach, describe, expect, it, vi } from "vitest";
import { startBuilderLoad, takeBuilderLoad, versionParam } from "./load";

function scriptedFetch() {
  const urls: string[] = [];
  const fetchMock = vi.fn(async (url: string) => {
    urls.push(url);
    return new Response(JSON.stringify(url.includes("node-kinds") ? { kinds: [] } : { id: 3, spec: { nodes: [], edges: [] } }), {
      status: 200, headers: { "Content-Type": "application/json" },
    });
  });
  vi.stubGlobal("fetch", fetchMock);
  return urls;
}

afterEach(() => vi.unstubAllGlobals());

describe("builder opening fetches", () => {
  it("starts the graph, node-kind and version requests together, before the page takes them", async () => {
    const urls = scriptedFetch();
    startBuilderLoad(3, 2);
    // All three are in flight at once (no waterfall), before any answer is awaited.
    expect(urls.sort()).toEqual(["/api/v1/graphs/3/", "/api/v1/graphs/3/versions/2/", "/api/v1/node-kinds/"]);
    const taken = takeBuilderLoad(3, 2);
    expect((await taken.kinds).kinds).toEqual([]);
    expect((await taken.graph).id).toBe(3);
    expect(urls).toHaveLength(3); // taking them fetched nothing again
  });

  it("is taken once, and only for the same graph and version", () => {
    const urls = scriptedFetch();
    startBuilderLoad(3, null);
    expect(urls).toHaveLength(2); // no version requested for the draft
    takeBuilderLoad(4, null); // another graph: fresh requests
    expect(urls.filter((u) => u.includes("/graphs/4/"))).toHaveLength(1);
    takeBuilderLoad(3, null); // the started ones
    expect(urls).toHaveLength(4);
    takeBuilderLoad(3, null); // already taken: a remount fetches again
    expect(urls).toHaveLength(6);
  });
});

describe("versionParam", () => {
  it("opens published versions only: 0 numbers node-test snapshots, so ?version=0 opens the draft", () => {
    window.history.replaceState(null, "", "/graphs/3/?version=2");
    expect(versionParam()).toBe(2);
    window.history.replaceState(null, "", "/graphs/3/?version=0");
    expect(versionParam()).toBeNull();
    window.history.replaceState(null, "", "/graphs/3/");
  });
});
