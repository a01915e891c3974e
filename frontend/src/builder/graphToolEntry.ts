// The palette's "Graph tool": a published graph offered to an agent as a tool, added to the agent it is dropped on (or to a new agent); and adding any palette entry.
import type { NodeKindInfo } from "../api/types";
import { GRAPH_TOOL_LISTS } from "./editors/fields";
import { freshId, updateNode, type GraphSpec, type NodeSpec, type Position } from "./spec";

/** The palette entry's kind: not a node kind of the catalogue, so no node of the graph has it. */
export const GRAPH_TOOL = "graph-tool";

/** The node kind a graph tool belongs to (the one kind with a graph-tool list). */
const AGENT = Object.keys(GRAPH_TOOL_LISTS)[0] ?? "agent";
/** Where the agent's config keeps its graph tools. */
const LIST = GRAPH_TOOL_LISTS[AGENT] ?? "graph_tools";

/**
 * ``catalogue`` with the "Graph tool" entry right after the agent kind, in the agent's
 * category; unchanged when the catalogue has no agent (nothing could take the tool).
 */
export function withGraphToolEntry(catalogue: readonly NodeKindInfo[]): NodeKindInfo[] {
  const at = catalogue.findIndex((k) => k.kind === AGENT);
  if (at < 0) return [...catalogue];
  const agent = catalogue[at] as NodeKindInfo;
  const entry: NodeKindInfo = {
    ...agent,
    kind: GRAPH_TOOL,
    title: "Graph tool",
    description: "A published graph an agent calls as a tool, as a durable child run. Drop it on an agent, or add it to make an agent with it.",
  };
  return [...catalogue.slice(0, at + 1), entry, ...catalogue.slice(at + 1)];
}

/** Whether node ``id`` of ``spec`` can take a graph tool (it is an agent). */
export function takesGraphTool(spec: GraphSpec, id: string | null | undefined): boolean {
  return id != null && spec.nodes.some((n) => n.id === id && n.kind in GRAPH_TOOL_LISTS);
}

export interface GraphToolAdded {
  spec: GraphSpec;
  /** The agent that got the tool. */
  node: string;
  /** The new row's graph picker, as a field path (``config.graph_tools.<i>.graph``) the panel focuses. */
  field: string;
}

/**
 * A new graph-tool row (``{version: "latest"}``, the graph still to pick) at the end of agent
 * ``agentId``'s graph tools when that node takes one; otherwise a new agent node at ``at`` with
 * that one row. Pure: returns the changed spec, the agent's id and the row's picker field.
 */
export function addGraphTool(spec: GraphSpec, agentId: string | null | undefined, at: Position): GraphToolAdded {
  if (agentId != null && takesGraphTool(spec, agentId)) {
    const agent = spec.nodes.find((n) => n.id === agentId) as NodeSpec;
    const list = GRAPH_TOOL_LISTS[agent.kind] ?? LIST;
    const config = agent.config ?? {};
    const rows = Array.isArray(config[list]) ? (config[list] as unknown[]) : [];
    return {
      spec: updateNode(spec, agentId, { config: { ...config, [list]: [...rows, { version: "latest" }] } }),
      node: agentId,
      field: `config.${list}.${rows.length}.graph`,
    };
  }
  const id = freshId(AGENT, new Set(spec.nodes.map((n) => n.id)));
  const node: NodeSpec = { id, kind: AGENT, config: { [LIST]: [{ version: "latest" }] }, position: { x: Math.round(at.x), y: Math.round(at.y) } };
  return { spec: { ...spec, nodes: [...spec.nodes, node] }, node: id, field: `config.${LIST}.0.graph` };
}

/**
 * What adding palette entry ``kind`` at ``at`` makes: a graph tool (on ``target`` when it is an
 * agent, see :func:`addGraphTool`), or a node of that kind with an empty config and a fresh id.
 * ``field`` is null for a plain node (nothing to focus).
 */
export function addPaletteEntry(spec: GraphSpec, kind: string, target: string | null | undefined, at: Position): Omit<GraphToolAdded, "field"> & { field: string | null } {
  if (kind === GRAPH_TOOL) return addGraphTool(spec, target, at);
  const id = freshId(kind, new Set(spec.nodes.map((n) => n.id)));
  const node: NodeSpec = { id, kind, config: {}, position: { x: Math.round(at.x), y: Math.round(at.y) } };
  return { spec: { ...spec, nodes: [...spec.nodes, node] }, node: id, field: null };
}
