// FlowHandle draws the element React Flow's <Handle> draws (classes, data attributes), so React
// Flow's handle measurement and connection code find it the same way.
import { Handle, Position, ReactFlow, ReactFlowProvider, type Node, type NodeProps } from "@xyflow/react";
import { render } from "@testing-library/react";
import { beforeAll, describe, expect, it } from "vitest";
import { FlowHandle } from "./FlowHandle";

beforeAll(() => {
  // jsdom has no ResizeObserver; React Flow only needs it to exist here.
  globalThis.ResizeObserver ??= class { observe() {} unobserve() {} disconnect() {} } as unknown as typeof ResizeObserver;
});

function Theirs({ isConnectable }: NodeProps) {
  return (
    <div>
      <Handle type="target" position={Position.Left} className="bhandle" isConnectable={isConnectable} />
      <Handle type="source" id="urgent" position={Position.Right} className="bhandle bhandle--out" isConnectable={isConnectable} />
    </div>
  );
}

function Ours({ id, isConnectable }: NodeProps) {
  return (
    <div>
      <FlowHandle nodeId={id} type="target" position={Position.Left} className="bhandle" isConnectable={isConnectable} />
      <FlowHandle nodeId={id} type="source" id="urgent" position={Position.Right} className="bhandle bhandle--out" isConnectable={isConnectable} />
    </div>
  );
}

function handles(Card: (p: NodeProps) => React.JSX.Element, connectable: boolean): string[][] {
  const nodes: Node[] = [{ id: "n1", type: "card", position: { x: 0, y: 0 }, data: {} }];
  const { container, unmount } = render(
    <ReactFlowProvider>
      <div style={{ width: 800, height: 600 }}>
        <ReactFlow nodes={nodes} edges={[]} nodeTypes={{ card: Card }} nodesConnectable={connectable} />
      </div>
    </ReactFlowProvider>,
  );
  const out = [...container.querySelectorAll(".react-flow__handle")].map((h) => [
    [...h.classList].sort().join(" "),
    ...["data-handleid", "data-nodeid", "data-handlepos", "data-id"].map((a) => `${a}=${h.getAttribute(a)}`),
  ]);
  unmount();
  return out;
}

describe("FlowHandle", () => {
  it.each([true, false])("matches React Flow's Handle element when connectable is %s", (connectable) => {
    const theirs = handles(Theirs, connectable);
    expect(theirs).toHaveLength(2);
    expect(handles(Ours, connectable)).toEqual(theirs);
  });
});
