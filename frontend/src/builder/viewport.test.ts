import { describe, expect, it } from "vitest";
import { CANVAS_INSETS, FIT_VIEW, fitViewport } from "./viewport";

// A 1000 x 600 px canvas; nodes 200 x 80 flow px.
const W = 1000;
const H = 600;

describe("fit view", () => {
  it("fits a graph that needs 50 % or more, centred as React Flow's fitView does", () => {
    const bounds = { x: 0, y: 0, width: 1200, height: 400 }; // needs zoom 1000 / (1200 * 1.15) = 0.72
    const v = fitViewport(bounds, { x: 0, y: 160, width: 200, height: 80 }, W, H);
    expect(v).not.toBeNull();
    expect(v!.zoom).toBeCloseTo(1000 / (1200 * 1.15), 3); // React Flow rounds the padding to whole px
    // Everything on screen, the graph's centre at the canvas's centre.
    expect(v!.x).toBeGreaterThan(0);
    expect(v!.x + bounds.width * v!.zoom).toBeLessThan(W);
    expect(v!.x + 600 * v!.zoom).toBeCloseTo(W / 2, 0);
    expect(v!.y + 200 * v!.zoom).toBeCloseTo(H / 2, 0);
  });

  it("does not zoom a small graph in past the fit's maximum", () => {
    const v = fitViewport({ x: 100, y: 100, width: 200, height: 80 }, null, W, H);
    expect(v!.zoom).toBe(FIT_VIEW.maxZoom);
  });

  it("fits a wide graph whole down to the floor: the refund example in the builder's canvas at 1280 x 720", () => {
    // examples/refund_agent.json: 15 nodes over 2 200 x 440 flow px; the canvas between the
    // palette and the side panel is 708 x 588 px. It needs 708 / (2200 * 1.15) = 0.28: the
    // old 50 % floor opened it at 50 % and cut off its right half.
    const bounds = { x: 0, y: 60, width: 2200, height: 440 };
    const [w, h] = [708, 588];
    const v = fitViewport(bounds, { x: 0, y: 200, width: 200, height: 64 }, w, h, FIT_VIEW, CANVAS_INSETS)!;
    expect(v.zoom).toBeCloseTo(w / (2200 * 1.15), 3);
    expect(v.zoom).toBeLessThan(0.3);
    expect(v.zoom).toBeGreaterThanOrEqual(FIT_VIEW.minZoom);
    // Whole and centred across; between the toolbar and the minimap down.
    expect(v.x + bounds.x * v.zoom).toBeGreaterThan(0);
    expect(v.x + (bounds.x + bounds.width) * v.zoom).toBeLessThan(w);
    expect(v.y + bounds.y * v.zoom).toBeGreaterThanOrEqual(CANVAS_INSETS.top);
    expect(v.y + (bounds.y + bounds.height) * v.zoom).toBeLessThanOrEqual(h - CANVAS_INSETS.bottom);
  });

  it("fits at exactly the floor, and anchors a graph that needs just less", () => {
    const at = W / (FIT_VIEW.minZoom * 1.15); // the widest graph that fits at the floor
    const fits = fitViewport({ x: 0, y: 0, width: at, height: 100 }, null, W, H)!;
    expect(fits.zoom).toBeCloseTo(FIT_VIEW.minZoom, 3);
    const anchored = fitViewport({ x: 0, y: 0, width: at * 1.02, height: 100 }, null, W, H)!;
    expect(anchored.zoom).toBe(FIT_VIEW.anchorZoom);
  });

  it("shows a graph too wide for the floor at 50 %, from its start node at the left edge", () => {
    // A 20-node chain, 260 px apart, start at x = 0 (needs 1000 / (5140 * 1.15) = 0.17); the
    // start node is drawn lower than the rest.
    const bounds = { x: 0, y: 0, width: 19 * 260 + 200, height: 300 };
    const start = { x: 0, y: 220, width: 200, height: 80 };
    const v = fitViewport(bounds, start, W, H)!;
    expect(v.zoom).toBe(0.5);
    const margin = (W - W / (1 + FIT_VIEW.padding)) / 2; // the fit's own padding, one side
    expect(v.x + start.x * v.zoom).toBeCloseTo(margin, 5); // start's left edge
    expect(v.y + (start.y + start.height / 2) * v.zoom).toBeCloseTo(H / 2, 5); // centred on start
    // The far end is off to the right (the user pans along), not cut off on both sides.
    expect(v.x + bounds.width * v.zoom).toBeGreaterThan(W);
  });

  it("anchors on the start node wherever it sits, and on the left edge when there is none", () => {
    const bounds = { x: -500, y: -2000, width: 300, height: 6000 }; // too tall: a 300-node column
    const start = { x: -300, y: 1000, width: 200, height: 80 };
    const v = fitViewport(bounds, start, W, H)!;
    expect(v.zoom).toBe(0.5);
    expect(v.y + 1040 * 0.5).toBeCloseTo(H / 2, 5);
    const noStart = fitViewport(bounds, null, W, H)!;
    expect(noStart.x + -500 * 0.5).toBeCloseTo((W - W / 1.15) / 2, 5);
    expect(noStart.y + 1000 * 0.5).toBeCloseTo(H / 2, 5); // the middle of the graph's height
  });

  it("leaves the view alone with nothing to fit or no canvas size yet", () => {
    expect(fitViewport(null, null, W, H)).toBeNull();
    expect(fitViewport({ x: 0, y: 0, width: 10, height: 10 }, null, 0, 0)).toBeNull();
  });

  it("keeps the fitted graph between the toolbar and the minimap", () => {
    const bounds = { x: 0, y: 0, width: 600, height: 500 }; // tall: the height decides the zoom
    const v = fitViewport(bounds, null, W, H, FIT_VIEW, CANVAS_INSETS)!;
    expect(v.y).toBeGreaterThanOrEqual(CANVAS_INSETS.top); // top edge below the toolbar
    expect(v.y + bounds.height * v.zoom).toBeLessThanOrEqual(H - CANVAS_INSETS.bottom); // bottom above the minimap
    // Without the insets the same graph would run under the minimap.
    const plain = fitViewport(bounds, null, W, H)!;
    expect(plain.y + bounds.height * plain.zoom).toBeGreaterThan(H - CANVAS_INSETS.bottom);
  });
});
