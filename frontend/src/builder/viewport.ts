// Where "fit view" puts the canvas: the whole graph when it is readable, else the start of it.
import { getViewportForBounds, type Rect, type Viewport } from "@xyflow/react";

/**
 * How the builder's fit view zooms. ``padding`` is React Flow's fraction (0.15: the graph takes
 * 1/1.15 of the free width and height). The whole graph is fitted when that needs ``minZoom``
 * or more (at most ``maxZoom``); a graph that would need less opens at ``anchorZoom`` from its
 * start node and the user pans along it, as in n8n.
 *
 * Why ``minZoom`` 0.5 (issue 25): below about half size a card's label (12 px) is under 6 px
 * and no node can be read, so a builder that fits the refund agent (2 860 px wide) into a
 * 1280 x 720 window at 20 % shows shapes nobody can edit. A graph wider than the canvas at
 * 50 % opens at 50 % from its start instead; collapsing the palette and the side panel
 * widens the canvas, and the minimap and Fit show where the rest is.
 */
export const FIT_VIEW = { padding: 0.15, minZoom: 0.5, anchorZoom: 0.5, maxZoom: 1.2 } as const;

/**
 * A run's page: an overview of the run's state is what its graph is for (each card's state
 * colour, the edges), and that overview holds down to a fifth: a 200 px card is still a
 * 40 x 16 px box there. Every shipped example fits whole at 1280 x 720; a graph that needs
 * less (more than about a dozen cards in a row) opens at 50 % from its start.
 */
export const FIT_RUN = { padding: 0.15, minZoom: 0.2, anchorZoom: 0.5, maxZoom: 1.2 } as const;

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
export interface Insets {
  top: number; bottom: number; left: number; right: number;
  /** The strip kept free at the bottom of the column between the corners (the builder's problems count); 0 when absent. */
  columnBottom?: number;
}

/**
 * What the canvas's overlays cover: the toolbar's strip at the top (56 px); at the bottom the
 * minimap (React Flow's 150 px plus its 1 px frame and 15 px margin, 202 px wide) on the
 * right, the zoom controls (26 px wide, 15 px in) on the left and the problems count (about
 * 30 px high, 12 px up) in the centre. A fitted graph stays clear
 * of all three, so no node opens under one.
 */
export const CANVAS_INSETS: Insets = { top: 56, bottom: 170, left: 48, right: 222, columnBottom: 52 };

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
  const column = fitIn(insets.left, insets.top, width - insets.left - insets.right, fullHeight - insets.top - (insets.columnBottom ?? 0));
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
