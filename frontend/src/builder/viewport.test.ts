import { describe, expect, it } from "vitest";
import { CANVAS_INSETS, FIT_RUN, FIT_VIEW, fitViewport } from "./viewport";

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

  it("opens the refund example in the builder's canvas at 1280 x 720 at 50 % from its start, not fitted at 21 %", () => {
    // examples/refund_agent.json: 15 nodes over 2 860 x 510 flow px (11 columns 260 px apart);
    // the canvas between the palette and the side panel is 708 x 588 px. Whole, it needs
    // 708 / (2860 * 1.15) = 0.215, where no label can be read (issue 25): the builder opens it at
    // 50 % from its start node instead.
    const bounds = { x: 0, y: 43, width: 2860, height: 510 };
    const start = { x: 0, y: 206, width: 200, height: 64 };
    const [w, h] = [708, 588];
    const v = fitViewport(bounds, start, w, h, FIT_VIEW, CANVAS_INSETS)!;
    expect(v.zoom).toBe(0.5);
    expect(v.x + start.x * v.zoom).toBeGreaterThan(0); // the start card on the canvas, at its left
    expect(v.x + (start.x + start.width) * v.zoom).toBeLessThan(w / 3);
    // The run page keeps the overview: the same graph fits whole there at 21 %.
    const run = fitViewport(bounds, start, w, h, FIT_RUN, CANVAS_INSETS)!;
    expect(run.zoom).toBeCloseTo(w / (2860 * 1.15), 3);
    expect(run.x + (bounds.x + bounds.width) * run.zoom).toBeLessThan(w);
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

  it("keeps a wide, flat graph between the toolbar and the minimap", () => {
    const bounds = { x: 0, y: 0, width: 1000, height: 400 };
    const v = fitViewport(bounds, null, W, H, FIT_VIEW, CANVAS_INSETS)!;
    const s = onScreen(v, bounds);
    expect(s.top).toBeGreaterThanOrEqual(CANVAS_INSETS.top); // below the toolbar
    expect(s.bottom).toBeLessThanOrEqual(H - CANVAS_INSETS.bottom); // above the minimap and controls
    expect(s.left).toBeGreaterThan(0);
    expect(s.right).toBeLessThan(W);
    // Without the insets the same graph would run under the minimap.
    const plain = onScreen(fitViewport(bounds, null, W, H)!, bounds);
    expect(plain.bottom).toBeGreaterThan(H - CANVAS_INSETS.bottom);
  });

  it("puts a tall graph between the controls and the minimap, larger than the band would", () => {
    const bounds = { x: 0, y: 0, width: 600, height: 500 }; // the height decides the zoom
    const v = fitViewport(bounds, null, W, H, FIT_VIEW, CANVAS_INSETS)!;
    const s = onScreen(v, bounds);
    expect(s.top).toBeGreaterThanOrEqual(CANVAS_INSETS.top);
    expect(s.bottom).toBeLessThanOrEqual(H);
    expect(s.left).toBeGreaterThanOrEqual(CANVAS_INSETS.left); // right of the controls
    expect(s.right).toBeLessThanOrEqual(W - CANVAS_INSETS.right); // left of the minimap
    const bandHeight = H - CANVAS_INSETS.top - CANVAS_INSETS.bottom;
    expect(v.zoom).toBeGreaterThan(bandHeight / (500 * 1.15));
  });

  it("clears the overlays in the run page's short canvas, whichever way the graph runs", () => {
    // The run page's canvas at 1280 x 720 is 1 188 x 438 px: the band is 212 px tall.
    const [w, h] = [1188, 438];
    const clear = (bounds: { x: number; y: number; width: number; height: number }) => {
      const v = fitViewport(bounds, null, w, h, FIT_RUN, CANVAS_INSETS)!;
      const s = onScreen(v, bounds);
      expect(s.top).toBeGreaterThanOrEqual(CANVAS_INSETS.top);
      const inBand = s.bottom <= h - CANVAS_INSETS.bottom;
      // Above the builder's problems count too, which sits at the column's foot.
      const inColumn = s.left >= CANVAS_INSETS.left && s.right <= w - CANVAS_INSETS.right && s.bottom <= h - (CANVAS_INSETS.columnBottom ?? 0);
      expect(inBand || inColumn).toBe(true);
      return v;
    };
    // The support-triage example (1 740 x 300): the band, at the zoom the width allows.
    expect(clear({ x: 0, y: 100, width: 1740, height: 300 }).zoom).toBeCloseTo(w / (1740 * 1.15), 2);
    // The research fan-out (1 340 x 430): the column beats the band's 0.43.
    expect(clear({ x: 0, y: 60, width: 1340, height: 430 }).zoom).toBeGreaterThan(0.55);
  });
});

/** The screen box (px) of flow ``bounds`` under viewport ``v``. */
function onScreen(v: { x: number; y: number; zoom: number }, b: { x: number; y: number; width: number; height: number }) {
  return { left: v.x + b.x * v.zoom, right: v.x + (b.x + b.width) * v.zoom, top: v.y + b.y * v.zoom, bottom: v.y + (b.y + b.height) * v.zoom };
}
