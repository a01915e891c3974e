// The node picker's pure logic: filtering and ranking kinds, keyboard moves, placing and connecting a picked node, clearing overlays.
import { describe, expect, it } from "vitest";
import type { NodeKindInfo } from "../api/types";
import { COLUMN, ROW, addConnected, clearOf, freeSpot, movePick, pickerKinds, placeFrom } from "./picker";
import type { GraphSpec } from "./spec";

function kind(k: string, title: string, extra: Partial<NodeKindInfo> = {}): NodeKindInfo {
  return {
    kind: k, title, description: `${title} node`, category: "data", config_schema: {}, inputs: ["in"], outputs: [],
    optional_outputs: [], default_output: true, dynamic_outputs: false, repeat_safe: false, uses_repeat_safe: false,
    does_work: true, can_loop: true, ...extra,
  } as NodeKindInfo;
}

const CATALOGUE = [
  kind("start", "Start", { inputs: [], category: "flow" }),
  kind("end", "End", { default_output: false, category: "flow" }),
  kind("transform", "Transform", { description: "Compute new state values with expressions" }),
  kind("condition", "Condition", { outputs: ["true", "false"], default_output: false, category: "logic" }),
  kind("llm", "LLM", { description: "Ask a language model", category: "ai" }),
  kind("agent", "Agent", { description: "An LLM that calls tools", category: "ai" }),
];
const ids = (ks: NodeKindInfo[]) => ks.map((k) => k.kind);

describe("pickerKinds", () => {
  it("lists every kind in catalogue order for an empty query and no origin", () => {
    expect(ids(pickerKinds(CATALOGUE, ""))).toEqual(["start", "end", "transform", "condition", "llm", "agent"]);
  });

  it("leaves out Start after an output and End before an input", () => {
    expect(ids(pickerKinds(CATALOGUE, "", { nodeId: "a", handleId: null, type: "source" }))).not.toContain("start");
    const before = ids(pickerKinds(CATALOGUE, "", { nodeId: "a", handleId: null, type: "target" }));
    expect(before).not.toContain("end");
    expect(before).toContain("condition"); // continues from its first named output
  });

  it("ranks a title that starts with the query before one that only mentions it", () => {
    // "llm" is the LLM kind's title and only in the agent's description.
    expect(ids(pickerKinds(CATALOGUE, "llm"))).toEqual(["llm", "agent"]);
    expect(ids(pickerKinds(CATALOGUE, "  LL "))).toEqual(["llm", "agent"]);
  });

  it("needs every word to match somewhere, and matches categories", () => {
    expect(ids(pickerKinds(CATALOGUE, "ai tools"))).toEqual(["agent"]);
    expect(ids(pickerKinds(CATALOGUE, "logic"))).toEqual(["condition"]);
    expect(pickerKinds(CATALOGUE, "zzz")).toEqual([]);
  });
});

describe("movePick", () => {
  it("wraps round with the arrows and jumps with Home, End and the page keys", () => {
    expect(movePick(0, 4, "ArrowDown")).toBe(1);
    expect(movePick(3, 4, "ArrowDown")).toBe(0);
    expect(movePick(0, 4, "ArrowUp")).toBe(3);
    expect(movePick(2, 4, "Home")).toBe(0);
    expect(movePick(1, 4, "End")).toBe(3);
    expect(movePick(1, 10, "PageDown")).toBe(6);
    expect(movePick(8, 10, "PageDown")).toBe(9);
    expect(movePick(3, 10, "PageUp")).toBe(0);
    expect(movePick(2, 4, "a")).toBe(2);
  });

  it("stays in range when the list shrinks under it, and is 0 for an empty list", () => {
    expect(movePick(7, 3, "x")).toBe(2);
    expect(movePick(5, 0, "ArrowDown")).toBe(0);
  });
});

const starter = (): GraphSpec => ({
  name: "g",
  nodes: [
    { id: "start", kind: "start", config: {}, position: { x: 0, y: 0 } },
    { id: "end", kind: "end", config: {}, position: { x: 520, y: 0 } },
  ],
  edges: [{ source: "start", target: "end" }],
});
const llm = CATALOGUE[4] as NodeKindInfo;

describe("addConnected", () => {
  it("puts a node into the edge of a connected output (start -> llm -> end), keeping the rest", () => {
    const spec = starter();
    const added = addConnected(spec, llm, placeFrom(spec, { nodeId: "start", handleId: null, type: "source" }),
      { nodeId: "start", handleId: null, type: "source" }, true);
    expect(added.id).toBe("llm");
    expect(added.inserted).toBe(true);
    expect(added.spec.edges).toEqual([{ source: "start", target: "llm" }, { source: "llm", target: "end" }]);
    expect(added.spec.nodes.find((n) => n.id === "llm")?.position).toEqual({ x: COLUMN, y: 0 });
    // End was two columns away: it stays where it was.
    expect(added.spec.nodes.find((n) => n.id === "end")?.position).toEqual({ x: 520, y: 0 });
    expect(spec.edges).toHaveLength(1); // the input spec is not changed
  });

  it("moves the old target and what follows it right when there is no room", () => {
    const spec: GraphSpec = {
      name: "g",
      nodes: [
        { id: "start", kind: "start", config: {}, position: { x: 0, y: 0 } },
        { id: "t", kind: "transform", config: {}, position: { x: 260, y: 0 } },
        { id: "end", kind: "end", config: {}, position: { x: 520, y: 0 } },
        { id: "aside", kind: "transform", config: {}, position: { x: 260, y: 400 } },
      ],
      edges: [{ source: "start", target: "t" }, { source: "t", target: "end" }],
    };
    const added = addConnected(spec, llm, { x: 0, y: 0 }, { nodeId: "start", handleId: null, type: "source" }, true);
    const at = (id: string) => added.spec.nodes.find((n) => n.id === id)?.position;
    expect(at("llm")).toEqual({ x: 260, y: 0 });
    expect(at("t")).toEqual({ x: 520, y: 0 });
    expect(at("end")).toEqual({ x: 780, y: 0 });
    expect(at("aside")).toEqual({ x: 260, y: 400 }); // not downstream: untouched
  });

  it("appends beside a connected output for a kind that cannot continue (End), and without insert", () => {
    const end = CATALOGUE[1] as NodeKindInfo;
    const spec = starter();
    const a = addConnected(spec, end, { x: 260, y: 0 }, { nodeId: "start", handleId: null, type: "source" }, true);
    expect(a.id).toBe("end_2");
    expect(a.inserted).toBe(false);
    expect(a.spec.edges).toEqual([{ source: "start", target: "end" }, { source: "start", target: "end_2" }]);
    const b = addConnected(spec, llm, { x: 100, y: 300 }, { nodeId: "start", handleId: null, type: "source" }, false);
    expect(b.spec.edges).toHaveLength(2);
    expect(b.spec.nodes.at(-1)?.position).toEqual({ x: 100, y: 300 });
  });

  it("connects from a named output and into a named input", () => {
    const cond = CATALOGUE[3] as NodeKindInfo;
    const spec = starter();
    const a = addConnected(spec, llm, { x: 0, y: 0 }, { nodeId: "start", handleId: "true", type: "source" });
    expect(a.spec.edges.at(-1)).toEqual({ source: "start", target: "llm", source_handle: "true" });
    const b = addConnected(spec, cond, { x: 0, y: 0 }, { nodeId: "end", handleId: null, type: "target" });
    expect(b.spec.edges.at(-1)).toEqual({ source: "condition", target: "end", source_handle: "true" });
  });

  it("adds the node unconnected when the origin node is gone", () => {
    const a = addConnected(starter(), llm, { x: 1.4, y: 2.6 }, { nodeId: "gone", handleId: null, type: "source" });
    expect(a.spec.edges).toHaveLength(1);
    expect(a.spec.nodes.at(-1)).toEqual({ id: "llm", kind: "llm", config: {}, position: { x: 1, y: 3 } });
  });
});

describe("placeFrom and freeSpot", () => {
  it("puts the node a column right of its source, spreads a node's outputs over rows and skips taken spots", () => {
    const spec = starter();
    expect(placeFrom(spec, { nodeId: "start", handleId: null, type: "source" })).toEqual({ x: COLUMN, y: 0 });
    expect(placeFrom(spec, { nodeId: "end", handleId: null, type: "target" })).toEqual({ x: 520 - COLUMN, y: 0 });
    expect(placeFrom(spec, { nodeId: "start", handleId: "b", type: "source" }, 1, 2)).toEqual({ x: COLUMN, y: ROW / 2 });
    const taken: GraphSpec = { ...spec, nodes: [...spec.nodes, { id: "x", kind: "llm", config: {}, position: { x: COLUMN + 10, y: 5 } }] };
    expect(placeFrom(taken, { nodeId: "start", handleId: null, type: "source" })).toEqual({ x: COLUMN, y: ROW });
    expect(freeSpot(taken.nodes, { x: COLUMN, y: 0 }, new Set(["x"]))).toEqual({ x: COLUMN, y: 0 });
  });
});

describe("clearOf", () => {
  const area = { x: 0, y: 0, width: 1000, height: 600 };
  it("leaves a clear box where it is", () => {
    const box = { x: 300, y: 300, width: 100, height: 40 };
    expect(clearOf(box, [{ x: 0, y: 0, width: 400, height: 50 }], area)).toBe(box);
  });

  it("moves a box dropped on the toolbar just below it", () => {
    const moved = clearOf({ x: 100, y: 10, width: 100, height: 40 }, [{ x: 10, y: 8, width: 400, height: 36 }], area);
    expect(moved).toEqual({ x: 100, y: 52, width: 100, height: 40 });
  });

  it("moves a box in a corner out of both overlays and stays in the canvas", () => {
    const minimap = { x: 780, y: 430, width: 205, height: 155 };
    const problems = { x: 420, y: 550, width: 160, height: 32 };
    const moved = clearOf({ x: 850, y: 540, width: 100, height: 40 }, [minimap, problems], area);
    for (const o of [minimap, problems]) {
      const overlaps = moved.x < o.x + o.width && o.x < moved.x + moved.width && moved.y < o.y + o.height && o.y < moved.y + moved.height;
      expect(overlaps).toBe(false);
    }
    expect(moved.x + moved.width).toBeLessThanOrEqual(1000);
    expect(moved.y + moved.height).toBeLessThanOrEqual(600);
  });
});
