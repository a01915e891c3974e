// Where "fit view" puts the canvas: the whole graph when it is readable, else the start of it.
import { getViewportForBounds, type Rect, type Viewport } from "@xyflow/react";

/**
 * How fit view zooms. ``padding`` is React Flow's fraction (0.15: the graph takes 1/1.15 of
 * the free width and height). The whole graph is fitted when that needs ``minZoom`` or more
 * (at most ``maxZoom``); a graph that would need less opens at ``anchorZoom`` from its start.
 *
 * Why ``minZoom`` 0.25: below 0.5 no label is legible anyway, so a fitted view is an overview
 * (the graph's shape, each card's kind stripe and state colour), and that overview holds down
 * to a quarter: a 200 px card is still a 50 x 20 px box. Every shipped example fits there at
 * 1280 x 720 (the widest, the refund agent, 2 200 px, needs 0.28 in the builder's 708 px
 * canvas, where a floor of 0.3 cut it off); Dify's canvas stops zooming out at 0.25 too. A
 * graph that needs less has more than about a dozen nodes in a row (0.25 of a 868 px canvas
 * is 11 cards 260 px apart) and its cards would shrink to dots (the 300-node chain needs
 * 0.01), so it opens at ``anchorZoom`` (50 %, labels still readable) from the start node
 * and the user pans along it, as in n8n.
 */
export const FIT_VIEW = { padding: 0.15, minZoom: 0.25, anchorZoom: 0.5, maxZoom: 1.2 } as const;

export interface FitOptions {
  padding: number;
  minZoom: number;
  anchorZoom: number;
  maxZoom: number;
}

/** Screen px at the canvas's edges that overlays cover (toolbar on top, minimap at the bottom). */
export interface Insets { top: number; bottom: number }

/**
 * What the canvas's overlays cover: the toolbar's strip at the top and the minimap's at the
 * bottom (React Flow's MiniMap is 150 px tall, plus its 1 px frame and 15 px margin). A
 * fitted graph stays between them, so no node opens under either.
 */
export const CANVAS_INSETS: Insets = { top: 56, bottom: 170 };

/**
 * The viewport (React Flow's x, y in screen px and zoom) that fits ``bounds`` (every node's
 * box, flow coordinates) in a ``width`` x ``height`` px canvas, as React Flow's fitView does,
 * when that needs a zoom of at least ``options.minZoom``. A graph too large for that is shown
 * at ``options.anchorZoom`` with ``start`` (the start node's box; null: the leftmost edge of
 * ``bounds``) at the left edge, one padding's width in, and the view vertically centred on
 * it: users read a graph from its start, and a centred view of a long chain lands mid-chain
 * with both ends cut off. Null when there is nothing to fit or the canvas has no size yet.
 */
export function fitViewport(bounds: Rect | null, start: Rect | null, width: number, fullHeight: number,
  options: FitOptions = FIT_VIEW, insets: Insets = { top: 0, bottom: 0 }): Viewport | null {
  // Fit into the band the overlays leave free (unless the canvas is too short to spare it).
  const free = fullHeight - insets.top - insets.bottom;
  const [height, top] = free >= fullHeight / 2 ? [free, insets.top] : [fullHeight, 0];
  if (!bounds || width <= 0 || height <= 0) return null;
  // A single point (one unmeasured node) still gets a box React Flow can divide by.
  const box = { ...bounds, width: Math.max(bounds.width, 1), height: Math.max(bounds.height, 1) };
  const whole = getViewportForBounds(box, width, height, 0, options.maxZoom, options.padding);
  if (whole.zoom >= options.minZoom) return { ...whole, y: whole.y + top };
  const zoom = options.anchorZoom;
  const anchor = start ?? { x: box.x, y: box.y, width: 0, height: box.height };
  const margin = (width - width / (1 + options.padding)) / 2;
  return {
    x: margin - anchor.x * zoom,
    y: top + height / 2 - (anchor.y + anchor.height / 2) * zoom,
    zoom,
  };
}
