// isBackEdge / loopPath: a loop back is drawn as a detour below the nodes, not under the forward edge.
import { describe, expect, it } from "vitest";
import { isBackEdge, LOOP_DROP, loopPath } from "./FlowEdge";

describe("back-edges", () => {
  it("are the edges whose target is left of or level with their source", () => {
    expect(isBackEdge(500, 100)).toBe(true);
    expect(isBackEdge(300, 300)).toBe(true);
    expect(isBackEdge(100, 500)).toBe(false);
  });
  it("run below both handles, leaving right of the source and entering left of the target", () => {
    const [path, labelX, labelY] = loopPath(500, 40, 100, 60);
    const ys = [...path.matchAll(/-?\d+(\.\d+)?/g)].map((m) => Number(m[0])).filter((_, i) => i % 2 === 1);
    expect(Math.max(...ys)).toBe(60 + LOOP_DROP);
    expect(labelY).toBe(60 + LOOP_DROP);
    expect(labelX).toBe(300);
    expect(path.startsWith("M 500 40")).toBe(true);
    expect(path.endsWith("L 100 60")).toBe(true);
  });
});
