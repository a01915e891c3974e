// The palette's "Graph tool" entry: where it sits, and what adding it does to the spec.
import { describe, expect, it } from "vitest";
import type { NodeKindInfo } from "../api/types";
import { GRAPH_TOOL, addGraphTool, takesGraphTool, withGraphToolEntry } from "./graphToolEntry";
import type { GraphSpec } from "./spec";

function kind(k: string, category: string): NodeKindInfo {
  return {
    kind: k, title: k, description: `${k} node`, category, config_schema: {}, inputs: ["in"], outputs: [],
    optional_outputs: [], default_output: true, dynamic_outputs: false, repeat_safe: false, uses_repeat_safe: false,
    does_work: true, can_loop: true,
  } as NodeKindInfo;
}

const SPEC: GraphSpec = {
  name: "g",
  nodes: [
    { id: "start", kind: "start", config: {}, position: { x: 0, y: 0 } },
    { id: "agent", kind: "agent", config: { prompt: "p", graph_tools: [{ graph: 4, version: "latest", name: "lookup" }] }, position: { x: 200, y: 0 } },
    { id: "llm", kind: "llm", config: {}, position: { x: 400, y: 0 } },
  ],
  edges: [],
};

describe("withGraphToolEntry", () => {
  it("puts Graph tool right after Agent, in the agent's category", () => {
    const out = withGraphToolEntry([kind("start", "flow"), kind("agent", "ai"), kind("llm", "ai")]);
    expect(out.map((k) => k.kind)).toEqual(["start", "agent", GRAPH_TOOL, "llm"]);
    expect(out[2]).toMatchObject({ title: "Graph tool", category: "ai" });
  });

  it("adds nothing when no kind can take a graph tool", () => {
    expect(withGraphToolEntry([kind("start", "flow")]).map((k) => k.kind)).toEqual(["start"]);
  });
});

describe("addGraphTool", () => {
  it("appends a row to the agent it is dropped on and names the row's picker", () => {
    const added = addGraphTool(SPEC, "agent", { x: 0, y: 0 });
    expect(added.node).toBe("agent");
    expect(added.field).toBe("config.graph_tools.1.graph");
    const agent = added.spec.nodes.find((n) => n.id === "agent");
    expect(agent?.config).toEqual({ prompt: "p", graph_tools: [{ graph: 4, version: "latest", name: "lookup" }, { version: "latest" }] });
    expect(added.spec.nodes).toHaveLength(3);
  });

  it("makes a new agent with the row where no agent takes it", () => {
    for (const target of [null, "llm", "missing"]) {
      const added = addGraphTool(SPEC, target, { x: 10.4, y: 20.6 });
      expect(added.node).toBe("agent_2");
      expect(added.field).toBe("config.graph_tools.0.graph");
      expect(added.spec.nodes.at(-1)).toEqual({ id: "agent_2", kind: "agent", config: { graph_tools: [{ version: "latest" }] }, position: { x: 10, y: 21 } });
    }
  });

  it("knows which nodes take a graph tool", () => {
    expect(takesGraphTool(SPEC, "agent")).toBe(true);
    expect(takesGraphTool(SPEC, "llm")).toBe(false);
    expect(takesGraphTool(SPEC, null)).toBe(false);
  });
});
