import type { GraphSpec } from "../builder/spec";
import { placedSpec } from "./placement";

describe("placedSpec", () => {
  const fanOut: GraphSpec = {
    name: "fan-out", nodes: ["start", "a", "b", "c", "join"].map((id) => ({ id, kind: id === "start" ? "start" : id === "join" ? "join" : "transform", config: {} })),
    edges: [["start", "a"], ["start", "b"], ["start", "c"], ["a", "join"], ["b", "join"], ["c", "join"]].map(([source, target]) => ({ source: source!, target: target! })),
  };

  it("lays a spec saved without positions out left to right, parallel branches in one column", () => {
    const placed = placedSpec(fanOut);
    const at = Object.fromEntries(placed.nodes.map((n) => [n.id, n.position!]));
    expect(new Set(["a", "b", "c"].map((id) => at[id]!.x)).size).toBe(1);
    expect(new Set(["a", "b", "c"].map((id) => at[id]!.y)).size).toBe(3);
    expect(at.start!.x).toBeLessThan(at.a!.x);
    expect(at.join!.x).toBeGreaterThan(at.a!.x);
  });

  it("keeps a spec whose nodes all have positions as it is", () => {
    const placed = { ...fanOut, nodes: fanOut.nodes.map((n, i) => ({ ...n, position: { x: i * 10, y: 0 } })) };
    expect(placedSpec(placed)).toBe(placed);
  });
});
