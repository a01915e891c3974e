// What a "Call graph" (subgraph) node's form offers: the published graphs it may call, the picked graph's versions and that version's input schema.
import { useEffect, useState } from "react";
import type { GraphSummary, Page } from "../../api/types";
import { api } from "../../lib/api";
import type { CalleeContext } from "../editors/formContext";

/** At most this many graphs are offered (the page size the API allows). */
const GRAPHS_OFFERED = 500;

let cachedGraphs: Promise<GraphSummary[]> | null = null;

/** Graphs with a published version, fetched once per page (a graph must be published to be called). */
export function loadCallableGraphs(): Promise<GraphSummary[]> {
  cachedGraphs ??= api<Page<GraphSummary>>(`graphs/?page_size=${GRAPHS_OFFERED}`).then(
    (page) => (page.results ?? []).filter((g) => g.latest_version !== null),
    () => [],
  );
  return cachedGraphs;
}

/** Forget the cached list (tests; after a publish the picker may offer one more). */
export function resetCallableGraphs(): void {
  cachedGraphs = null;
}

interface VersionSpec {
  number: number;
  spec: { input_schema?: Record<string, unknown> | null };
}

/**
 * The picked graph's choices for the form (``formContext.callee``): the graphs to pick from
 * (``selfId`` left out: a graph cannot call itself), the picked graph's published version
 * numbers, and the input schema of the version the node runs (``"latest"``: the newest).
 */
export function useCallee(enabled: boolean, selfId: number | null, graphId: unknown, version: unknown): CalleeContext | null {
  const [graphs, setGraphs] = useState<GraphSummary[]>([]);
  const [schema, setSchema] = useState<Record<string, unknown> | null>(null);
  useEffect(() => {
    if (!enabled) return;
    let live = true;
    void loadCallableGraphs().then((g) => live && setGraphs(g));
    return () => {
      live = false;
    };
  }, [enabled]);
  const picked = typeof graphId === "number" ? graphs.find((g) => g.id === graphId) : undefined;
  const latest = picked?.latest_version ?? null;
  const number = version === "latest" || version === undefined ? latest : typeof version === "number" ? version : null;
  useEffect(() => {
    setSchema(null);
    if (!enabled || !picked || number === null) return;
    let live = true;
    void api<VersionSpec>(`graphs/${picked.id}/versions/${number}/`).then(
      (v) => live && setSchema(v.spec.input_schema ?? { type: "object", properties: {} }),
      () => live && setSchema(null),
    );
    return () => {
      live = false;
    };
  }, [enabled, picked, number]);
  if (!enabled) return null;
  return {
    graphs: graphs.filter((g) => g.id !== selfId).map((g) => ({ id: g.id, name: g.name, latest: g.latest_version ?? 0 })),
    picked: picked ? { id: picked.id, name: picked.name, latest: latest ?? 0 } : null,
    schema,
  };
}
