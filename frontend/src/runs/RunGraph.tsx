// The run page's graph: the builder's own canvas, read-only, on the version the run ran, each node marked with its state (a lazy chunk).
import type { NodeKindInfo, NodeKinds, RunGraph as RunGraphAnswer, ValidationResult } from "../api/types";
import "@xyflow/react/dist/style.css";
import "../builder/builder.css";
import { ReactFlowProvider } from "@xyflow/react";
import { useEffect, useMemo, useRef, useState } from "react";
import { Canvas } from "../builder/Canvas";
import type { NodeRunMark } from "../builder/flow";
import type { GraphSpec } from "../builder/spec";
import { BuilderContext, useBuilderState } from "../builder/store";
import { api } from "../lib/api";
import { ErrorMessage, Skeleton } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { placedSpec } from "./placement";
import { testedNodeOnly } from "./runView";

const noop = () => undefined;

/**
 * Each node's handles in ``spec`` as the server's validation gives them (a condition's
 * cases, not its kind's fixed true/false), as a validation result carrying nothing else (no
 * errors, no estimates: the run page marks states, not problems); undefined while the
 * answer is pending, null when validation could not answer (the kinds' handles are drawn).
 */
function useHandles(spec: GraphSpec | undefined): ValidationResult | null | undefined {
  const [handles, setHandles] = useState<ValidationResult | null | undefined>(undefined);
  useEffect(() => {
    if (!spec) return;
    const ctrl = new AbortController();
    api<ValidationResult>("graphs/validate/", { method: "POST", body: spec, signal: ctrl.signal })
      .then((r) => setHandles({ ...r, valid: true, errors: [], warnings: [] }))
      .catch((err: unknown) => { if (!(err instanceof DOMException && err.name === "AbortError")) setHandles(null); });
    return () => ctrl.abort();
  }, [spec]);
  return handles;
}

/** The loaded graph in a read-only builder state (the canvas reads it through BuilderContext). */
function ReadOnlyCanvas({ spec, catalogue, handles, marks, selected, onOpen }: {
  spec: GraphSpec; catalogue: NodeKindInfo[]; handles: ValidationResult | null; marks: Readonly<Record<string, NodeRunMark>>;
  selected: string | null; onOpen: (nodeId: string) => void;
}) {
  const options = useMemo(() => ({ readOnly: true, catalogue, validation: handles }), [catalogue, handles]);
  const placed = useMemo(() => placedSpec(spec), [spec]);
  const builder = useBuilderState(placed, options);
  const { select } = builder;
  // The inspected node is the canvas's selection (opened from the timeline too).
  useEffect(() => select({ nodes: selected ? [selected] : [], edges: [], notes: [], field: null }), [selected, select]);
  return (
    <BuilderContext.Provider value={builder}>
      <ReactFlowProvider>
        <Canvas onMessage={noop} runMarks={marks} onNodeOpen={onOpen} />
      </ReactFlowProvider>
    </BuilderContext.Provider>
  );
}

/**
 * The graph run ``runId`` ran (GET runs/<id>/graph/: its pinned version's spec; for a
 * node-test run, its hidden test snapshot, which no version URL serves) drawn with the
 * builder's canvas, read-only, each node coloured by ``marks`` (its state in the run);
 * clicking a node calls ``onOpen`` with its id. ``testedNode`` (a node-test run) draws that
 * node alone, not the test harness around it. Fetches the spec and the node kinds once,
 * then the nodes' handles from validation.
 */
export default function RunGraph({ runId, testedNode, marks, selected, onOpen, onSpec }: {
  runId: number; testedNode?: string | null; marks: Readonly<Record<string, NodeRunMark>>;
  selected: string | null; onOpen: (nodeId: string) => void;
  /** Called once the spec is loaded (the page marks nodes that have no step yet). */
  onSpec?: (spec: GraphSpec) => void;
}) {
  const loaded = useApi<RunGraphAnswer>(`runs/${runId}/graph/`);
  const drawn = useMemo(() => {
    if (!loaded.data) return loaded.data;
    return testedNode ? { spec: testedNodeOnly(loaded.data.spec, testedNode) } : loaded.data;
  }, [loaded.data, testedNode]);
  const spec = { ...loaded, data: drawn };
  const kinds = useApi<NodeKinds>("node-kinds/");
  // Drawn once the handles are known: a card that loses handles after the first fit shrinks.
  const handles = useHandles(spec.data?.spec);
  const onSpecRef = useRef(onSpec);
  onSpecRef.current = onSpec;
  useEffect(() => { if (spec.data) onSpecRef.current?.(spec.data.spec); }, [spec.data]);
  if (spec.error) return <ErrorMessage error={spec.error} title="The graph could not be loaded." onRetry={spec.reload} />;
  if (kinds.error) return <ErrorMessage error={kinds.error} title="The node kinds could not be loaded." onRetry={kinds.reload} />;
  if (!spec.data || !kinds.data || handles === undefined) return <Skeleton lines={6} label="Drawing the graph…" />;
  return <ReadOnlyCanvas spec={spec.data.spec} catalogue={kinds.data.kinds} handles={handles} marks={marks} selected={selected} onOpen={onOpen} />;
}
