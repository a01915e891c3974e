// The canvas's minimap: the nodes drawn from the canvas's own node list (the spec's positions),
// the view from React Flow's transform. No work while a node is dragged.
import { Panel, useStore, useStoreApi, type Node, type ReactFlowState } from "@xyflow/react";
import { XYMinimap, type XYMinimapInstance } from "@xyflow/system";
import { memo, useEffect, useId, useMemo, useRef } from "react";
import type { FlowNode } from "./flow";
import { minimapShapes, minimapView, viewRect, type MiniNode } from "./minimap";

// React Flow's MiniMap size (viewport.ts's CANVAS_INSETS counts on it).
const WIDTH = 200;
const HEIGHT = 150;

// Only what the view rectangle and the pan/zoom handler need: a node drag changes none of it,
// so a drag frame runs this one selector and renders nothing here.
const selectView = (s: ReactFlowState) => ({
  transform: s.transform, width: s.width, height: s.height, panZoom: s.panZoom, translateExtent: s.translateExtent,
});
type View = ReturnType<typeof selectView>;
const sameView = (a: View, b: View) => a.transform[0] === b.transform[0] && a.transform[1] === b.transform[1]
  && a.transform[2] === b.transform[2] && a.width === b.width && a.height === b.height && a.panZoom === b.panZoom
  && a.translateExtent === b.translateExtent;

/** A node's size as React Flow draws it: measured, else set, else unknown (0). */
function size(n: Node): { width: number; height: number } {
  return { width: n.measured?.width ?? n.width ?? n.initialWidth ?? 0, height: n.measured?.height ?? n.height ?? n.initialHeight ?? 0 };
}

/**
 * ``nodes``: the canvas's nodes (the spec's positions; React Flow's store alone has a drag's
 * live positions, and the canvas catches up at the drop). Memoised on that array. Click and drag
 * pans the canvas, the wheel zooms it (React Flow's XYMinimap, as its MiniMap does).
 */
export const SpecMiniMap = memo(function SpecMiniMap({ nodes, nodeColour, ariaLabel = "Mini map" }: {
  nodes: readonly FlowNode[]; nodeColour: (n: FlowNode) => string; ariaLabel?: string;
}) {
  const shapes = useMemo(() => minimapShapes(nodes.filter((n) => !n.hidden).map((n): MiniNode => ({
    x: n.position.x, y: n.position.y, ...size(n), colour: nodeColour(n),
  }))), [nodes, nodeColour]);
  const { transform, width, height, panZoom, translateExtent } = useStore(selectView, sameView);
  const store = useStoreApi();
  const view = viewRect(transform, width, height);
  const box = minimapView(shapes.bounds, view, WIDTH, HEIGHT);
  const svg = useRef<SVGSVGElement>(null);
  const viewScale = useRef(box.viewScale);
  viewScale.current = box.viewScale;
  const minimap = useRef<XYMinimapInstance | null>(null);
  useEffect(() => {
    if (!svg.current || !panZoom) return;
    const instance = XYMinimap({
      domNode: svg.current, panZoom, getTransform: () => store.getState().transform, getViewScale: () => viewScale.current,
    });
    minimap.current = instance;
    return () => { instance.destroy(); minimap.current = null; };
  }, [panZoom, store]);
  useEffect(() => {
    minimap.current?.update({ translateExtent, width, height, pannable: true, zoomable: true, inversePan: false, zoomStep: 1 });
  }, [panZoom, translateExtent, width, height]);
  const titleId = useId();
  const { x, y, offset } = box;
  return (
    <Panel position="bottom-right" className="react-flow__minimap" data-testid="rf__minimap">
      <svg width={WIDTH} height={HEIGHT} viewBox={`${x} ${y} ${box.width} ${box.height}`} className="react-flow__minimap-svg"
        role="img" aria-labelledby={titleId} ref={svg}>
        <title id={titleId}>{ariaLabel}</title>
        {shapes.paths.map((p) => (
          <path key={p.colour} className="react-flow__minimap-node" d={p.d} style={{ fill: p.colour }} shapeRendering="crispEdges" />
        ))}
        <path className="react-flow__minimap-mask" fillRule="evenodd" pointerEvents="none"
          d={`M${x - offset},${y - offset}h${box.width + offset * 2}v${box.height + offset * 2}h${-box.width - offset * 2}z`
            + `M${view.x},${view.y}h${view.width}v${view.height}h${-view.width}z`} />
      </svg>
    </Panel>
  );
});
