// One graph node on the canvas: kind, label, error badge and its named handles in a stable order.
import { Position, useUpdateNodeInternals, type NodeProps } from "@xyflow/react";
import { memo, useContext, useEffect, useRef } from "react";
import { formatCost } from "../shell/format";
import { FlowHandle } from "./FlowHandle";
import type { BallastFlowNode } from "./flow";
import { RUN_STATE_LABELS } from "./runStateColours";
import { AddAfterContext } from "./addAfter";
import { usePinned } from "./run/pins";

/** A category's accent colour (stable per name, so a new category gets one without code changes). */
export function categoryColour(category: string | undefined): string {
  const known: Record<string, string> = { flow: "#64748b", ai: "#7c3aed", llm: "#7c3aed", tools: "#0891b2", tool: "#0891b2",
    control: "#d97706", logic: "#d97706", people: "#16a34a", human: "#16a34a", data: "#2563eb" };
  if (category && known[category.toLowerCase()]) return known[category.toLowerCase()] as string;
  let h = 0;
  for (const ch of category ?? "") h = (h * 31 + ch.charCodeAt(0)) % 360;
  return `hsl(${h} 55% 45%)`;
}

function NodeCardImpl({ id, data, selected, isConnectable }: NodeProps<BallastFlowNode>) {
  const { node, info, handles, errors, diff, estimate, run, linked = "" } = data;
  const addAfter = useContext(AddAfterContext);
  const pinned = usePinned(node.id) && !data.readOnly;
  const plus = !data.readOnly && isConnectable && addAfter !== null;
  // Handles that follow the config (a condition's cases) change after mount: React Flow
  // must measure them again, or edges to a new handle cannot be drawn or shown.
  const updateInternals = useUpdateNodeInternals();
  const handleKey = `${handles.inputs.join(",")}|${handles.hasInput}|${handles.defaultOutput}|${handles.outputs.join(",")}`;
  const measuredKey = useRef(handleKey);
  useEffect(() => {
    if (measuredKey.current === handleKey) return; // the first measure happens on mount anyway
    measuredKey.current = handleKey;
    updateInternals(id);
  }, [id, handleKey, updateInternals]);
  const named = handles.outputs;
  const outputs = handles.defaultOutput ? [null, ...named] : named;
  const title = info?.title ?? node.kind;
  const tip = errors.map((e) => (e.field ? `${e.field}: ${e.message}` : e.message)).join("\n");
  const rows = Math.max(outputs.length, handles.inputs.length, 1);
  // The handles sit in two zero-width rails at the card's inner left and right edges, in
  // normal flow (a grid, rails after the body so they paint and hit-test above it): absolutely
  // positioned, every handle was a paint layer of its own that Chromium layerized on each
  // drag frame. The rails space their handles evenly, which puts the i-th of n at
  // (i + 1) / (n + 1) of the card's height, as the old `top` percentages did.
  return (
    <div
      className={`bnode${errors.length ? " bnode--error" : ""}${selected ? " bnode--selected" : ""}${info ? "" : " bnode--unknown"}${diff ? ` bnode--diff bnode--diff-${diff}` : ""}${run ? ` bnode--run bnode--run-${run.state} status-${run.state}` : ""}`}
      style={{ ["--kind" as string]: categoryColour(info?.category), minHeight: 44 + rows * 20 }}
      data-testid={`node-${node.id}`}
      data-kind={node.kind}
      data-diff={diff}
      data-state={run?.state}
      title={tip || undefined}
    >
      <div className="bnode__body">
        <div className="bnode__head">
          <span className="bnode__kind">{title}</span>
          {pinned && <span className="bnode__pin" title="Test data pinned: Test node and value previews use it" role="img" aria-label="pinned test data"><svg viewBox="0 0 16 16" width="12" height="12" aria-hidden="true"><path fill="currentColor" d="M10.5 1.5 14.5 5.5 13 6.2 10.9 8.3 11.2 12 9.9 13.3 6.8 10.2 3 14 2 14 2 13 5.8 9.2 2.7 6.1 4 4.8 7.7 5.1 9.8 3z" /></svg></span>}
          {diff && <span className={`bnode__diff bnode__diff--${diff}`}>{diff}</span>}
          {run && <span className={`bnode__state bnode__state--${run.state}`} aria-hidden="true">{RUN_STATE_LABELS[run.state]}</span>}
          {errors.length > 0 && (
            <span className="bnode__errors" aria-label={`${errors.length} error${errors.length > 1 ? "s" : ""}: ${tip}`} title={tip}>
              {errors.length}
            </span>
          )}
        </div>
        <div className="bnode__label">{node.label || node.id}</div>
        {node.label && <div className="bnode__id">{node.id}</div>}
        {run?.detail && <div className="bnode__run-detail">{run.detail}</div>}
        {estimate && !run && <div className="bnode__cost" title="Estimated cost of one run of this node (worst case)">{formatCost(estimate)}</div>}
        {errors.length > 0 && <div className="bnode__message">{errors[0]?.message}</div>}
      </div>
      <div className="bnode__rail bnode__rail--in">
        {handles.hasInput && handles.inputs.length === 0 && (
          <FlowHandle nodeId={id} type="target" position={Position.Left} className="bhandle" isConnectable={isConnectable} />
        )}
        {handles.inputs.map((name) => (
          <FlowHandle nodeId={id} key={`in-${name}`} id={name} type="target" position={Position.Left} className="bhandle bhandle--labelled" isConnectable={isConnectable}>
            <span className="bhandle__label bhandle__label--in">{name}</span>
          </FlowHandle>
        ))}
      </div>
      <div className="bnode__rail bnode__rail--out">
        {outputs.map((name, i) => {
          const free = !linked.includes(`[${name ?? ""}]`);
          return (
            <FlowHandle nodeId={id} key={`out-${name ?? ""}`} id={name ?? undefined} type="source" position={Position.Right} isConnectable={isConnectable}
              className={`bhandle bhandle--out${name ? " bhandle--named bhandle--labelled" : ""}`}
              data-handle={name ?? ""}>
              <span className="bhandle__after">
                {name && <span className="bhandle__label">{name}</span>}
                {plus && (
                  // Pressed, it must not start a connection or a node drag (the handle's and React Flow's own mouse down).
                  <button type="button" className={`bhandle__plus nodrag nopan${free ? " bhandle__plus--free" : ""}`}
                    aria-label={`Add a node after ${node.label || node.id}${name ? ` (${name})` : ""}`} title="Add a node here (opens the node picker)"
                    onMouseDown={(e) => e.stopPropagation()} onTouchStart={(e) => e.stopPropagation()}
                    onClick={(e) => {
                      e.stopPropagation();
                      addAfter({ nodeId: id, handleId: name, type: "source" }, i, outputs.length, e.currentTarget.getBoundingClientRect());
                    }}>+</button>
                )}
              </span>
            </FlowHandle>
          );
        })}
      </div>
    </div>
  );
}

/**
 * The same props but for where the node is: React Flow moves the wrapper around the card
 * (its transform), so a dragged node's card does not render again on every frame.
 */
export function sameCardProps(a: NodeProps<BallastFlowNode>, b: NodeProps<BallastFlowNode>): boolean {
  const keys = Object.keys(b) as (keyof NodeProps<BallastFlowNode>)[];
  if (keys.length !== Object.keys(a).length) return false;
  return keys.every((k) => k === "positionAbsoluteX" || k === "positionAbsoluteY" || Object.is(a[k], b[k]));
}

/** Memoised: React Flow re-renders a node only when its node object (data, selection) changes, not as it moves. */
export const NodeCard = memo(NodeCardImpl, sameCardProps);
