import { describe, expect, it } from "vitest";
import { minimapShapes, minimapView, viewRect } from "./minimap";

const grey = "#94a3b8";
const note = "#fde68a";

describe("minimap shapes", () => {
  it("draws one path per colour and bounds every measured node", () => {
    const s = minimapShapes([
      { x: 0, y: 0, width: 180, height: 60, colour: grey },
      { x: 260, y: 130, width: 180, height: 60, colour: grey },
      { x: -100, y: 300, width: 220, height: 140, colour: note },
    ]);
    expect(s.paths.map((p) => p.colour)).toEqual([grey, note]);
    expect(s.paths[0]!.d.match(/M/g)).toHaveLength(2); // two rects, one path
    expect(s.bounds).toEqual({ x: -100, y: 0, width: 540, height: 440 });
  });

  it("leaves out nodes not yet measured, as React Flow's minimap does", () => {
    const s = minimapShapes([{ x: 5, y: 5, width: 0, height: 0, colour: grey }]);
    expect(s.paths).toEqual([]);
    expect(s.bounds).toBeNull();
  });

  it("rounds a rect's corners by at most half its shorter side", () => {
    const d = minimapShapes([{ x: 10, y: 20, width: 100, height: 4, colour: grey }]).paths[0]!.d;
    expect(d.startsWith("M12,20h96a2,2 0 0 1 2,2")).toBe(true);
  });
});

describe("minimap view", () => {
  it("takes the view from React Flow's transform and the canvas size", () => {
    expect(viewRect([-100, 50, 0.5], 1000, 600)).toEqual({ x: 200, y: -100, width: 2000, height: 1200 });
  });

  it("fits the nodes and the view into the box, centred, with a margin (React Flow's viewBox)", () => {
    const bounds = { x: 0, y: 0, width: 4000, height: 1000 };
    const view = { x: 0, y: 0, width: 1000, height: 600 };
    const v = minimapView(bounds, view, 200, 150);
    expect(v.viewScale).toBe(20); // 4000 flow units across 200 px
    expect(v.offset).toBe(100);
    expect(v).toMatchObject({ x: -100, width: 4200, height: 3200 });
    expect(v.y + v.height / 2).toBeCloseTo(500); // the bounds' centre
  });

  it("shows the view alone when there are no nodes", () => {
    const view = { x: 10, y: 20, width: 200, height: 150 };
    expect(minimapView(null, view, 200, 150)).toMatchObject({ x: 5, y: 15, width: 210, height: 160, viewScale: 1 });
  });

  it("grows to take in a view beside the nodes", () => {
    const v = minimapView({ x: 0, y: 0, width: 200, height: 150 }, { x: 1000, y: 0, width: 200, height: 150 }, 200, 150);
    expect(v.viewScale).toBe(6);
    expect(v.x).toBe(-30);
  });
});
