// The minimap's geometry, pure: node rects as one SVG path per colour, and the viewBox React Flow's MiniMap uses.

/** A rect in flow coordinates. */
export interface Rect { x: number; y: number; width: number; height: number }

/** What the minimap needs of a node: where it is, its size (0 until measured), its colour. */
export interface MiniNode { x: number; y: number; width: number; height: number; colour: string }

/** The nodes drawn: one path per colour (a few elements, not one per node), and their bounds. */
export interface MiniShapes { paths: { colour: string; d: string }[]; bounds: Rect | null }

/** Corner radius of a node's rect, flow units (React Flow's MiniMap default). */
export const MINIMAP_RADIUS = 5;

/** One rounded rect as path commands (the radius clamped to half the shorter side). */
function roundedRect({ x, y, width: w, height: h }: Rect, radius: number): string {
  const r = Math.min(radius, w / 2, h / 2);
  if (r <= 0) return `M${x},${y}h${w}v${h}h${-w}z`;
  return `M${x + r},${y}h${w - 2 * r}a${r},${r} 0 0 1 ${r},${r}v${h - 2 * r}a${r},${r} 0 0 1 ${-r},${r}`
    + `h${-(w - 2 * r)}a${r},${r} 0 0 1 ${-r},${-r}v${-(h - 2 * r)}a${r},${r} 0 0 1 ${r},${-r}z`;
}

/**
 * The nodes' shapes: nodes not yet measured (no size) are left out, as React Flow's MiniMap
 * leaves them out; paths keep the order in which their colours first appear.
 */
export function minimapShapes(nodes: readonly MiniNode[], radius = MINIMAP_RADIUS): MiniShapes {
  const byColour = new Map<string, string[]>();
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const n of nodes) {
    if (!(n.width > 0 && n.height > 0)) continue;
    let parts = byColour.get(n.colour);
    if (!parts) { parts = []; byColour.set(n.colour, parts); }
    parts.push(roundedRect(n, radius));
    x0 = Math.min(x0, n.x); y0 = Math.min(y0, n.y);
    x1 = Math.max(x1, n.x + n.width); y1 = Math.max(y1, n.y + n.height);
  }
  return {
    paths: [...byColour].map(([colour, parts]) => ({ colour, d: parts.join("") })),
    bounds: x0 === Infinity ? null : { x: x0, y: y0, width: x1 - x0, height: y1 - y0 },
  };
}

/** The part of the flow the canvas shows, from React Flow's transform [x, y, zoom] and the canvas's size. */
export function viewRect(transform: readonly [number, number, number], width: number, height: number): Rect {
  const [tx, ty, zoom] = transform;
  return { x: -tx / zoom, y: -ty / zoom, width: width / zoom, height: height / zoom };
}

/** The minimap's viewBox (flow units) and the flow units per minimap px. */
export interface MiniView { x: number; y: number; width: number; height: number; viewScale: number; offset: number }

/**
 * As React Flow's MiniMap: the nodes' bounds joined with the view, scaled to fit an
 * ``elementWidth`` x ``elementHeight`` px box, centred, with ``offsetScale`` px of margin.
 */
export function minimapView(bounds: Rect | null, view: Rect, elementWidth: number, elementHeight: number, offsetScale = 5): MiniView {
  const b = bounds ? join(bounds, view) : view;
  const viewScale = Math.max(b.width / elementWidth, b.height / elementHeight);
  const viewWidth = viewScale * elementWidth;
  const viewHeight = viewScale * elementHeight;
  const offset = offsetScale * viewScale;
  return {
    x: b.x - (viewWidth - b.width) / 2 - offset,
    y: b.y - (viewHeight - b.height) / 2 - offset,
    width: viewWidth + offset * 2,
    height: viewHeight + offset * 2,
    viewScale,
    offset,
  };
}

function join(a: Rect, b: Rect): Rect {
  const x = Math.min(a.x, b.x);
  const y = Math.min(a.y, b.y);
  return { x, y, width: Math.max(a.x + a.width, b.x + b.width) - x, height: Math.max(a.y + a.height, b.y + b.height) - y };
}
