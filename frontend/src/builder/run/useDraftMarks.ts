// A draft run's result on the builder's canvas: each node coloured by its step's state (as a run's
// page colours them) while the draft is the one that ran and the results drawer is open.
import type { RunDetail } from "../../api/types";
import { useCallback, useMemo, useState } from "react";
import type { NodeRunMark } from "../flow";
import type { GraphSpec } from "../spec";
import { nodeMarks } from "../../runs/runView";

/** What a run of ``spec`` ran: its nodes' kinds and configs and its edges (not where the cards sit). */
export function ranShape(spec: Pick<GraphSpec, "nodes" | "edges">): string {
  return JSON.stringify([spec.nodes.map((n) => [n.id, n.kind, n.config ?? null]), spec.edges]);
}

/**
 * The marks of draft run ``runId`` on ``spec``'s nodes: ``onRun`` hears each fresh read of the
 * run; ``marks`` is undefined when no run is shown (``runId`` null: none yet, or the drawer was
 * closed) or once the draft differs from the one that ran (a node, its config or an edge changed;
 * moving a card does not count).
 */
export function useDraftMarks(spec: GraphSpec, runId: number | null): { marks: Readonly<Record<string, NodeRunMark>> | undefined; onRun(run: RunDetail): void } {
  const { nodes, edges } = spec;
  const shape = useMemo(() => ranShape({ nodes, edges }), [nodes, edges]);
  const [seen, setSeen] = useState<{ run: number; shape: string; marks: Record<string, NodeRunMark> } | null>(null);
  const onRun = useCallback((run: RunDetail) => {
    setSeen((prev) => ({
      run: run.id,
      // The draft that ran is the one shown when the run was first read (the run saved it first).
      shape: prev && prev.run === run.id ? prev.shape : shape,
      marks: nodeMarks(nodes.map((n) => n.id), run.steps ?? [], run.status),
    }));
  }, [shape, nodes]);
  const marks = seen && runId === seen.run && seen.shape === shape ? seen.marks : undefined;
  return { marks, onRun };
}
