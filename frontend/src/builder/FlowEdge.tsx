// The canvas's edge: a straight line or a smooth step forward, a visible detour below the nodes for a loop back.
import { BaseEdge, MarkerType, Position, getSmoothStepPath, type EdgeMarker, type EdgeProps } from "@xyflow/react";
import { memo } from "react";

/** The edges' stroke colour: builder.css sets it as React Flow's ``--xy-edge-stroke`` too (keep the two equal). */
export const EDGE_COLOUR = "#7b8696";

/**
 * The arrowhead every edge ends with (React Flow draws one marker definition for all of
 * them). Sized in canvas px rather than React Flow's default stroke-width units: about
 * 7 x 10 px at 100 %, large enough to tell the direction of a short edge at a glance.
 */
export const EDGE_ARROW: EdgeMarker = { type: MarkerType.ArrowClosed, color: EDGE_COLOUR, width: 26, height: 26, markerUnits: "userSpaceOnUse" };

/** How far below the lower of its two handles a back-edge runs (px, flow coordinates): clear of the node cards. */
export const LOOP_DROP = 72;
/** How far a back-edge leaves its source and enters its target horizontally (px). */
const LOOP_REACH = 24;
const CORNER = 8;
/**
 * Handles this close vertically (px, flow coordinates) are joined by a straight line: a smooth
 * step between them is an S a few px tall, which reads as a glitch rather than a bend (two
 * cards of slightly different heights side by side put their handles a few px apart; on the
 * run page a card that ran grows a line for its duration, 7.5 px off its neighbour's).
 */
export const LEVEL_TOLERANCE = 8;
/**
 * A longer edge is straight too while its slope stays under 1 in 50: a 1 500 px edge whose
 * ends are 12 px apart otherwise kinks in its middle, and a straight line that falls 12 px
 * over its length looks level.
 */
export const LEVEL_SLOPE = 1 / 50;

/**
 * True when an edge from a handle at x ``sourceX`` goes back to one at ``targetX`` (left of
 * or level with it): a smooth step would run straight back along the forward edges, hidden
 * under them, so the loop could not be seen.
 */
export function isBackEdge(sourceX: number, targetX: number): boolean {
  return targetX <= sourceX;
}

/**
 * The SVG path of a back-edge: out of the source to the right, down to ``LOOP_DROP`` below the
 * lower handle, left under the nodes, up and into the target from its left, with rounded
 * corners. Returns ``[path, labelX, labelY]`` (the label point is the middle of the bottom run).
 */
export function loopPath(sourceX: number, sourceY: number, targetX: number, targetY: number): [string, number, number] {
  const right = sourceX + LOOP_REACH;
  const left = targetX - LOOP_REACH;
  const bottom = Math.max(sourceY, targetY) + LOOP_DROP;
  const c = CORNER;
  const path = [
    `M ${sourceX} ${sourceY}`,
    `L ${right - c} ${sourceY} Q ${right} ${sourceY} ${right} ${sourceY + c}`,
    `L ${right} ${bottom - c} Q ${right} ${bottom} ${right - c} ${bottom}`,
    `L ${left + c} ${bottom} Q ${left} ${bottom} ${left} ${bottom - c}`,
    `L ${left} ${targetY + c} Q ${left} ${targetY} ${left + c} ${targetY}`,
    `L ${targetX} ${targetY}`,
  ].join(" ");
  return [path, (left + right) / 2, bottom];
}

/**
 * The SVG path of a forward edge: a straight line when the handles are within
 * ``LEVEL_TOLERANCE`` px of level (or the line's slope is under ``LEVEL_SLOPE``), else React
 * Flow's smooth step (right angles, rounded).
 */
export function forwardPath(sourceX: number, sourceY: number, targetX: number, targetY: number,
  sourcePosition: Position = Position.Right, targetPosition: Position = Position.Left): string {
  const rise = Math.abs(targetY - sourceY);
  if (rise <= Math.max(LEVEL_TOLERANCE, Math.abs(targetX - sourceX) * LEVEL_SLOPE)) return `M ${sourceX} ${sourceY} L ${targetX} ${targetY}`;
  return getSmoothStepPath({ sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition })[0];
}

function FlowEdgeImpl(props: EdgeProps) {
  const { sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition, markerEnd, style, interactionWidth } = props;
  if (isBackEdge(sourceX, targetX)) {
    const [path] = loopPath(sourceX, sourceY, targetX, targetY);
    return <BaseEdge path={path} markerEnd={markerEnd} style={style} interactionWidth={interactionWidth} className="bedge-loop" />;
  }
  const path = forwardPath(sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition);
  return <BaseEdge path={path} markerEnd={markerEnd} style={style} interactionWidth={interactionWidth} />;
}

export const FlowEdge = memo(FlowEdgeImpl);
