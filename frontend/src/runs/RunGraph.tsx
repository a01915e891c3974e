// The run page's graph: the builder's own canvas, read-only, on the version the run ran, each node marked with its state (a lazy chunk).
import "@xyflow/react/dist/style.css";
import "../builder/builder.css";
import { ReactFlowProvider } from "@xyflow/react";
import { useEffect, useMemo, useRef } from "react";
import { Canvas } from "../builder/Canvas";
import type { NodeRunMark } from "../builder/flow";
import type { GraphSpec } from "../builder/spec";
import { BuilderContext, useBuilderState, type NodeKindInfo } from "../builder/store";
import { ErrorMessage, Loading } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { placedSpec } from "./placement";

const noop = () => undefined;

/** The loaded graph in a read-only builder state (the canvas reads it through BuilderContext). */
function ReadOnlyCanvas({ spec, catalogue, marks, selected, onOpen }: {
  spec: GraphSpec; catalogue: NodeKindInfo[]; marks: Readonly<Record<string, NodeRunMark>>;
  selected: string | null; onOpen: (nodeId: string) => void;
}) {
  const options = useMemo(() => ({ readOnly: true, catalogue, validation: null }), [catalogue]);
  const placed = useMemo(() => placedSpec(spec), [spec]);
  const builder = useBuilderState(placed, options);
  const { select } = builder;
  // The inspected node is the canvas's selection (opened from the timeline too).
  useEffect(() => select({ nodes: selected ? [selected] : [], edges: [], notes: [], field: null }), [selected, select]);
  return (
    <BuilderContext.Provider value={builder}>
      <ReactFlowProvider>
        <Canvas onHelp={noop} onMessage={noop} runMarks={marks} onNodeOpen={onOpen} />
      </ReactFlowProvider>
    </BuilderContext.Provider>
  );
}

/**
 * The graph of version ``version`` of graph ``graphId`` drawn with the builder's canvas,
 * read-only, each node coloured by ``marks`` (its state in the run); clicking a node calls
 * ``onOpen`` with its id. Fetches the version's spec and the node kinds once.
 */
export default function RunGraph({ graphId, version, marks, selected, onOpen, onSpec }: {
  graphId: number; version: number; marks: Readonly<Record<string, NodeRunMark>>;
  selected: string | null; onOpen: (nodeId: string) => void;
  /** Called once the version's spec is loaded (the page marks nodes that have no step yet). */
  onSpec?: (spec: GraphSpec) => void;
}) {
  const spec = useApi<{ spec: GraphSpec }>(`graphs/${graphId}/versions/${version}/`);
  const kinds = useApi<{ kinds: NodeKindInfo[] }>("node-kinds/");
  const onSpecRef = useRef(onSpec);
  onSpecRef.current = onSpec;
  useEffect(() => { if (spec.data) onSpecRef.current?.(spec.data.spec); }, [spec.data]);
  if (spec.error) return <ErrorMessage error={spec.error} title="The graph could not be loaded." onRetry={spec.reload} />;
  if (kinds.error) return <ErrorMessage error={kinds.error} title="The node kinds could not be loaded." onRetry={kinds.reload} />;
  if (!spec.data || !kinds.data) return <Loading label="Drawing the graph…" />;
  return <ReadOnlyCanvas spec={spec.data.spec} catalogue={kinds.data.kinds} marks={marks} selected={selected} onOpen={onOpen} />;
}
