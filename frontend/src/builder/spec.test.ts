import { freshId, removeNodes, type GraphSpec } from "./spec";

describe("spec edits", () => {
  it("finds a free id", () => {
    expect(freshId("llm", new Set())).toBe("llm");
    expect(freshId("llm", new Set(["llm", "llm_2"]))).toBe("llm_3");
    expect(freshId("9 lives!", new Set())).toBe("_9_lives_");
  });

  it("removes nodes with their edges", () => {
    const spec: GraphSpec = {
      name: "g",
      nodes: [{ id: "a", kind: "start", config: {} }, { id: "b", kind: "end", config: {} }],
      edges: [{ source: "a", target: "b" }],
    };
    const out = removeNodes(spec, new Set(["b"]));
    expect(out.nodes.map((n) => n.id)).toEqual(["a"]);
    expect(out.edges).toEqual([]);
  });
});
