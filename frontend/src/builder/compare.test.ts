// comparisonView: what the canvas draws for a version diff, and how each part is marked.
import type { VersionDiff } from "../api/types";
import { describe, expect, it } from "vitest";
import { comparisonView } from "./compare";
import { specToFlowNodes } from "./flow";
import type { GraphSpec } from "./spec";

const older: GraphSpec = {
  name: "g",
  nodes: [
    { id: "start", kind: "start", config: {}, position: { x: 0, y: 0 } },
    { id: "calc", kind: "transform", config: { set: { s: "1" } }, position: { x: 200, y: 0 } },
    { id: "old", kind: "end", config: {}, position: { x: 400, y: 100 } },
    { id: "end", kind: "end", config: {}, position: { x: 400, y: 0 } },
  ],
  edges: [{ source: "start", target: "calc" }, { source: "calc", target: "old" }, { source: "calc", target: "end" }],
};
const newer: GraphSpec = {
  name: "g",
  nodes: [
    { id: "start", kind: "start", config: {}, position: { x: 0, y: 50 } },
    { id: "calc", kind: "transform", config: { set: { s: "2" } }, position: { x: 200, y: 0 } },
    { id: "end", kind: "end", config: {}, position: { x: 400, y: 0 } },
    { id: "fresh", kind: "end", config: {}, position: { x: 400, y: -100 } },
  ],
  edges: [{ source: "start", target: "calc" }, { source: "calc", target: "end" }, { source: "calc", target: "fresh" }],
};
const diff: VersionDiff = {
  from: 1,
  to: 2,
  nodes: { added: ["fresh"], removed: ["old"], changed: [{ id: "calc", fields: { config: { from: { set: { s: "1" } }, to: { set: { s: "2" } } } } }] },
  edges: { added: [{ source: "calc", target: "fresh" }], removed: [{ source: "calc", target: "old" }] },
  settings: {}, state: {}, input_schema: null, description: null,
  layout: { positions: ["start"], notes: { added: [], removed: [], changed: [] } },
  logic_identical: false,
  identical: false,
};

describe("comparisonView", () => {
  it("draws the newer graph with the removed node and edge kept at their old places", () => {
    const { spec } = comparisonView(older, newer, diff);
    expect(spec.nodes.map((n) => n.id)).toEqual(["start", "calc", "end", "fresh", "old"]);
    expect(spec.nodes.find((n) => n.id === "old")?.position).toEqual({ x: 400, y: 100 });
    expect(spec.nodes.find((n) => n.id === "start")?.position).toEqual({ x: 0, y: 50 }); // the newer layout
    expect(spec.edges).toContainEqual({ source: "calc", target: "old" });
    expect(spec.edges).toHaveLength(4);
  });

  it("marks added, removed and changed nodes (a move alone is no mark) and added/removed edges", () => {
    const { spec, marks } = comparisonView(older, newer, diff);
    expect(marks.nodes).toEqual({ fresh: "added", old: "removed", calc: "changed" });
    expect(marks.edges).toEqual({ "calc:->fresh:": "added", "calc:->old:": "removed" });
    const drawn = specToFlowNodes(spec, { catalogue: [], validation: null, readOnly: true, diffStatus: marks.nodes });
    const mark = Object.fromEntries(drawn.map((n) => [n.id, (n.data as { diff?: string }).diff ?? null]));
    expect(mark).toEqual({ start: null, calc: "changed", end: null, fresh: "added", old: "removed" });
    expect("diff" in (drawn[0]?.data as object)).toBe(false);
  });
});
