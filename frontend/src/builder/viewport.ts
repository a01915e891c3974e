// Where "fit view" puts the canvas: the whole graph when it is readable, else the start of it.
import { getViewportForBounds, type Rect, type Viewport } from "@xyflow/react";

/**
 * How fit view zooms. ``padding`` is React Flow's fraction (0.15: the graph takes 1/1.15 of
 * the free width and height). The whole graph is fitted when that needs ``minZoom`` or more
 * (at most ``maxZoom``); a graph that would need less opens at ``anchorZoom`` from its start.
 *
 * Why ``minZoom`` 0.2: below 0.5 no label is legible anyway, so a fitted view is an overview
 * (the graph's shape, each card's kind stripe and state colour, the edges, which keep their
 * screen width), and that overview holds down to a fifth: a 200 px card is still a 40 x 16 px
 * box with a 12 px gap to the next. Every shipped example fits there at 1280 x 720: the
 * widest, the refund agent (11 columns 260 px apart, so its cards and their handle labels
 * never touch: 2 860 px), needs 0.215 in the builder's 708 px canvas. At the 0.25 floor this
 * replaced (Dify's) the refund agent fitted only with its cards 200 px apart, edge to edge. A
 * graph that needs less has more than about a dozen nodes in a row (0.2 of a 868 px canvas
 * is 13 cards 260 px apart) and its cards would shrink to dots (the 300-node chain needs
 * 0.01), so it opens at ``anchorZoom`` (50 %, labels still readable) from the start node
 * and the user pans along it, as in n8n.
 */
export const FIT_VIEW = { padding: 0.15, minZoom: 0.2, anchorZoom: 0.5, maxZoom: 1.2 } as const;

export interface FitOptions {
  padding: number;
  minZoom: number;
  anchorZoom: number;
  maxZoom: number;
}

/**
 * Screen px the canvas's overlays cover: the toolbar's strip along the top, the minimap's and
 * the zoom controls' strip along the bottom, and the columns those two take in the bottom
 * corners (controls on the left, minimap on the right).
 */
export interface Insets { top: number; bottom: number; left: number; right: number }

/**
 * What the canvas's overlays cover: the toolbar's strip at the top (56 px); at the bottom the
 * minimap (React Flow's 150 px plus its 1 px frame and 15 px margin, 202 px wide) on the
 * right and the zoom controls (26 px wide, 15 px in) on the left. A fitted graph stays clear
 * of all three, so no node opens under one.
 */
export const CANVAS_INSETS: Insets = { top: 56, bottom: 170, left: 48, right: 222 };

const NO_INSETS: Insets = { top: 0, bottom: 0, left: 0, right: 0 };

/**
 * The viewport (React Flow's x, y in screen px and zoom) that fits ``bounds`` (every node's
 * box, flow coordinates) in a ``width`` x ``height`` px canvas, as React Flow's fitView does,
 * when that needs a zoom of at least ``options.minZoom``, clear of the overlays ``insets``
 * describes. Two rectangles are clear of them: the band between the top and bottom strips,
 * full width, and the column between the bottom corners' overlays, from the top strip
 * down; the graph goes in whichever shows it larger (the band on a tie: it centres the
 * graph across the whole canvas). A wide, flat graph lands in the band, a tall one or one
 * in a short canvas (the run page's) in the column.
 *
 * A graph too large for ``options.minZoom`` is shown at ``options.anchorZoom`` with
 * ``start`` (the start node's box; null: the leftmost edge of ``bounds``) at the left edge,
 * one padding's width in, and the view vertically centred on it (in the band when that is at
 * least half the canvas): users read a graph from its start, and a centred view of a long
 * chain lands mid-chain with both ends cut off. Null when there is nothing to fit or the
 * canvas has no size yet.
 */
export function fitViewport(bounds: Rect | null, start: Rect | null, width: number, fullHeight: number,
  options: FitOptions = FIT_VIEW, insets: Insets = NO_INSETS): Viewport | null {
  if (!bounds || width <= 0 || fullHeight <= 0) return null;
  // A single point (one unmeasured node) still gets a box React Flow can divide by.
  const box = { ...bounds, width: Math.max(bounds.width, 1), height: Math.max(bounds.height, 1) };
  const fitIn = (x: number, y: number, w: number, h: number): Viewport | null => {
    if (w <= 0 || h <= 0) return null;
    const v = getViewportForBounds(box, w, h, 0, options.maxZoom, options.padding);
    return { x: v.x + x, y: v.y + y, zoom: v.zoom };
  };
  const band = fitIn(0, insets.top, width, fullHeight - insets.top - insets.bottom);
  const column = fitIn(insets.left, insets.top, width - insets.left - insets.right, fullHeight - insets.top);
  // Overlays that leave no room at all (a tiny canvas): fit the whole canvas, under them.
  const whole = band && (!column || band.zoom >= column.zoom) ? band : column ?? fitIn(0, 0, width, fullHeight);
  if (whole && whole.zoom >= options.minZoom) return whole;
  const free = fullHeight - insets.top - insets.bottom;
  const [height, top] = free >= fullHeight / 2 ? [free, insets.top] : [fullHeight, 0];
  const zoom = options.anchorZoom;
  const anchor = start ?? { x: box.x, y: box.y, width: 0, height: box.height };
  const margin = (width - width / (1 + options.padding)) / 2;
  return {
    x: margin - anchor.x * zoom,
    y: top + height / 2 - (anchor.y + anchor.height / 2) * zoom,
    zoom,
  };
}
