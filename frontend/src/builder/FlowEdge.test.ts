// isBackEdge / loopPath / forwardPath: a loop back is a detour below the nodes; nearly level handles are joined straight.
import { describe, expect, it } from "vitest";
import { forwardPath, isBackEdge, LEVEL_TOLERANCE, LOOP_DROP, loopPath } from "./FlowEdge";

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

describe("forward edges", () => {
  it("are a straight line between handles within a few px of level", () => {
    expect(forwardPath(200, 100, 260, 100)).toBe("M 200 100 L 260 100");
    expect(forwardPath(200, 100, 260, 100 + LEVEL_TOLERANCE)).toBe(`M 200 100 L 260 ${100 + LEVEL_TOLERANCE}`);
    expect(forwardPath(200, 104, 260, 100)).toBe("M 200 104 L 260 100");
    // A long edge stays straight at a slope under 1 in 50 (12 px over 1 500 px).
    expect(forwardPath(200, 100, 1700, 112)).toBe("M 200 100 L 1700 112");
  });
  it("step with rounded corners when the handles are further apart vertically", () => {
    expect(forwardPath(200, 100, 300, 100 + LEVEL_TOLERANCE + 1)).not.toContain(" L 300");
    const path = forwardPath(200, 100, 260, 160);
    expect(path.startsWith("M200 100")).toBe(true);
    expect(path).toContain("Q"); // the smooth step's rounded bends
    expect(path.endsWith("L260 160")).toBe(true);
  });
});
