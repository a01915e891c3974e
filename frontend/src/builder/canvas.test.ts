// Pure parts of the canvas: spec <-> React Flow mapping, copy/paste fragments, layout handle order, draft diff.
import type { NodeKindInfo } from "../api/types";
import { describe, expect, it } from "vitest";
import triage from "../../../examples/support_triage.json";
import { copyFragment, parseFragment, pasteFragment, pasteOffset } from "./clipboard";
import { diffDrafts } from "./conflict";
import { NOTE_PREFIX, type BallastFlowNode, applyPositions, connectionToEdge, flowToSpec, nodeHandles, removeElements, specToFlowEdges, specToFlowNodes, withLivePositions, withSelection } from "./flow";
import { sameCardProps } from "./NodeCard";
import { layoutPositions } from "./layout";
import { formatCost } from "../shell/format";
import { groupKinds } from "./Palette";
import type { GraphSpec } from "./spec";
import * as factories from "../test/factories";

const spec = triage as unknown as GraphSpec;
// Categories outside the server's choices too ("people", "integrations"): the palette groups whatever comes.
const kind = (k: string, category: string, outputs: string[] = [], extra: Partial<NodeKindInfo> = {}): NodeKindInfo => ({
  kind: k, title: k[0]?.toUpperCase() + k.slice(1), description: `${k} node`, category: category as NodeKindInfo["category"], config_schema: {},
  inputs: k === "start" ? [] : ["in"], outputs, optional_outputs: [], default_output: outputs.length === 0, dynamic_outputs: k === "condition",
  repeat_safe: true, uses_repeat_safe: true, does_work: true, can_loop: true, ...extra,
});
const catalogue = [kind("start", "flow"), kind("end", "flow"), kind("llm", "ai"), kind("tool", "tools"),
  kind("condition", "logic", ["true", "false"]), kind("approval", "people", ["approved", "rejected"]), kind("transform", "data")];
const opts = { catalogue, validation: null, readOnly: false };

describe("spec <-> React Flow mapping", () => {
  it("round-trips the example unchanged, keeping unknown fields and absent defaults", () => {
    const withExtra: GraphSpec = { ...spec, nodes: spec.nodes.map((n, i) => (i === 0 ? { ...n, x_custom: { keep: true } } as typeof n : n)) };
    const nodes = specToFlowNodes(withExtra, opts);
    const back = flowToSpec(withExtra, nodes);
    expect(back).toBe(withExtra); // nothing moved: the very same document
    expect(JSON.parse(JSON.stringify(back))).toEqual(JSON.parse(JSON.stringify(withExtra)));
    expect("config" in (back.nodes[0] as object)).toBe(false); // start had no config; none was added
  });

  it("writes only moved positions back", () => {
    const nodes = specToFlowNodes(spec, opts).map((n) => (n.id === "route" ? { ...n, position: { x: 500.4, y: 210.6 } } : n));
    const back = flowToSpec(spec, nodes);
    expect(back.nodes.find((n) => n.id === "route")?.position).toEqual({ x: 500, y: 211 });
    back.nodes.forEach((n, i) => { if (n.id !== "route") expect(n).toBe(spec.nodes[i]); });
    expect(back.edges).toBe(spec.edges);
  });

  it("maps edges with their named handles, and connections back without unnamed handles", () => {
    const edges = specToFlowEdges(spec, { readOnly: false });
    const urgent = edges.find((e) => e.source === "route" && e.sourceHandle === "urgent");
    expect(urgent?.target).toBe("page_oncall");
    expect(edges.find((e) => e.source === "start")?.sourceHandle).toBeNull();
    expect(connectionToEdge({ source: "a", target: "b", sourceHandle: null, targetHandle: null })).toEqual({ source: "a", target: "b" });
    expect(connectionToEdge({ source: "r", target: "b", sourceHandle: "approved", targetHandle: null })).toEqual({ source: "r", target: "b", source_handle: "approved" });
  });

  it("draws notes apart from nodes and moves them back into spec.notes", () => {
    const s: GraphSpec = { ...spec, notes: [{ id: "n1", text: "hello", position: { x: 1, y: 2 }, width: 300, height: 100 }] };
    const nodes = specToFlowNodes(s, opts);
    const note = nodes.find((n) => n.id === NOTE_PREFIX + "n1");
    expect(note?.type).toBe("note");
    const back = applyPositions(s, new Map([[NOTE_PREFIX + "n1", { x: 10, y: 20 }]]));
    expect(back.notes?.[0]).toEqual({ id: "n1", text: "hello", position: { x: 10, y: 20 }, width: 300, height: 100 });
    expect(back.nodes).toBe(s.nodes);
  });

  it("orders handles: validation's first (cases, then default), then names only edges use", () => {
    const route = spec.nodes.find((n) => n.id === "route")!;
    const fromValidation = { inputs: ["in"], outputs: ["urgent", "default"], default_output: false, optional: [] };
    expect(nodeHandles(route, catalogue[4], fromValidation, spec.edges).outputs).toEqual(["urgent", "default"]);
    // Without validation yet: the catalogue's fixed handles, plus the ones the edges use (sorted).
    expect(nodeHandles(route, catalogue[4], undefined, spec.edges).outputs).toEqual(["true", "false", "default", "urgent"]);
    const start = spec.nodes[0]!;
    const h = nodeHandles(start, catalogue[0], undefined, spec.edges);
    expect([h.hasInput, h.defaultOutput, h.outputs]).toEqual([false, true, []]);
  });

  it("applies a selection without copying unselected nodes or any node's data", () => {
    const s: GraphSpec = { ...spec, notes: [{ id: "n1", text: "", position: { x: 0, y: 0 } }] };
    const drawn = specToFlowNodes(s, opts);
    expect(withSelection(drawn, new Set(), new Set())).toBe(drawn); // nothing selected: the same array
    const picked = withSelection(drawn, new Set(["route"]), new Set(["n1"]));
    picked.forEach((n, i) => {
      const selected = n.id === "route" || n.id === NOTE_PREFIX + "n1";
      expect(!!n.selected).toBe(selected);
      if (!selected) expect(n).toBe(drawn[i]); // untouched nodes keep their object: memoised cards skip them
      expect(n.data).toBe(drawn[i]?.data);
    });
    // Moving the selection on flips only the two nodes involved.
    const next = withSelection(picked, new Set(["classify"]), new Set(["n1"]));
    expect(next.filter((n, i) => n !== picked[i]).map((n) => n.id).sort()).toEqual(["classify", "route"]);
  });

  it("puts the nodes a drag is moving where React Flow holds them, copying only those", () => {
    const drawn = specToFlowNodes(spec, opts);
    expect(withLivePositions(drawn, new Map())).toBe(drawn); // no drag: the same array
    const moved = withLivePositions(drawn, new Map([["route", { x: 512.5, y: 7 }]]));
    moved.forEach((n, i) => {
      if (n.id === "route") expect([n.position, n.dragging, n.data]).toEqual([{ x: 512.5, y: 7 }, true, drawn[i]?.data]);
      else expect(n).toBe(drawn[i]);
    });
    expect(withLivePositions(moved, new Map([["route", { x: 512.5, y: 7 }]]))).toBe(moved); // already there
  });

  it("renders a node card again when what it draws changes, not when it only moves", () => {
    const node = specToFlowNodes(spec, opts)[0] as BallastFlowNode;
    const props = { id: node.id, data: node.data, type: "ballast", selected: false, isConnectable: true, zIndex: 0,
      dragging: false, draggable: true, selectable: true, deletable: true, positionAbsoluteX: 0, positionAbsoluteY: 0 } as Parameters<typeof sameCardProps>[0];
    expect(sameCardProps(props, { ...props, positionAbsoluteX: 40, positionAbsoluteY: -3 })).toBe(true);
    expect(sameCardProps(props, { ...props, selected: true })).toBe(false);
    expect(sameCardProps(props, { ...props, data: { ...props.data } })).toBe(false);
    expect(sameCardProps(props, { ...props, width: 180 })).toBe(false); // a prop that appears
  });

  it("removes nodes with their edges, single edges and notes", () => {
    const edgeIds = new Set(specToFlowEdges(spec, { readOnly: false }).filter((e) => e.source === "classify").map((e) => e.id));
    const out = removeElements(spec, new Set(["review"]), edgeIds, new Set());
    expect(out.nodes.map((n) => n.id)).not.toContain("review");
    expect(out.edges.some((e) => e.source === "review" || e.target === "review" || e.source === "classify")).toBe(false);
    expect(out.edges).toHaveLength(spec.edges.length - 4);
  });
});

describe("cost estimates on node cards", () => {
  it("puts a node's estimate on its card only when it costs something", () => {
    const validation = factories.validation({
      estimate: factories.estimate({ classify: { usd: "0.0021", tokens: 350 }, route: { usd: "0", tokens: 0 } }, { nodes: ["classify"], usd: "0.0021", tokens: 350 }),
    });
    const nodes = specToFlowNodes(spec, { ...opts, validation });
    const data = (id: string) => nodes.find((n) => n.id === id)!.data as { estimate?: unknown };
    expect(data("classify").estimate).toEqual(validation.estimate?.nodes.classify);
    expect("estimate" in data("route")).toBe(false);
    expect(formatCost({ usd: "0.0021", tokens: 350 })).toBe("$0.0021 · 350 tokens");
  });
});

describe("copy and paste", () => {
  it("copies the selection with only its internal edges and pastes with new ids", () => {
    const fragment = copyFragment(spec, new Set(["route", "page_oncall", "search_kb"]));
    expect(fragment.nodes.map((n) => n.id)).toEqual(["route", "page_oncall", "search_kb"]);
    expect(fragment.edges).toEqual([
      { source: "route", source_handle: "urgent", target: "page_oncall" },
      { source: "route", source_handle: "default", target: "search_kb" },
    ]);
    const again = parseFragment(JSON.stringify(fragment));
    expect(again).toEqual(fragment);
    const { spec: out, nodeIds } = pasteFragment(spec, again!);
    expect(nodeIds).toEqual(["route_2", "page_oncall_2", "search_kb_2"]);
    expect(out.nodes).toHaveLength(spec.nodes.length + 3);
    expect(out.edges.slice(spec.edges.length)).toEqual([
      { source: "route_2", source_handle: "urgent", target: "page_oncall_2" },
      { source: "route_2", source_handle: "default", target: "search_kb_2" },
    ]);
    const pasted = out.nodes.find((n) => n.id === "route_2")!;
    const original = spec.nodes.find((n) => n.id === "route")!;
    expect(pasted.config).toEqual(original.config);
    expect(pasted.position).toEqual({ x: original.position!.x + 40, y: original.position!.y + 40 });
    expect(out.nodes.slice(0, spec.nodes.length)).toEqual(spec.nodes);
    // Pasting twice gives fresh ids again.
    expect(pasteFragment(out, again!).nodeIds).toEqual(["route_3", "page_oncall_3", "search_kb_3"]);
  });

  it("never pastes exactly over what is there: a step further per paste, or at the pointer", () => {
    const fragment = copyFragment(spec, new Set(["route", "page_oncall"]));
    const original = spec.nodes.find((n) => n.id === "route")!.position!;
    const first = pasteFragment(spec, fragment);
    expect(first.spec.nodes.find((n) => n.id === "route_2")!.position).toEqual({ x: original.x + 40, y: original.y + 40 });
    // The same fragment again: the first copy sits at +40, so this one goes to +80.
    const second = pasteFragment(first.spec, fragment);
    expect(second.spec.nodes.find((n) => n.id === "route_3")!.position).toEqual({ x: original.x + 80, y: original.y + 80 });
    // With the pointer on the canvas, the copy's top-left corner goes there; the layout inside is kept.
    const at = { x: 1000, y: 700 };
    const offset = pasteOffset(spec, fragment, at);
    const placed = pasteFragment(spec, fragment, offset).spec;
    const route = placed.nodes.find((n) => n.id === "route_2")!.position!;
    const oncall = placed.nodes.find((n) => n.id === "page_oncall_2")!.position!;
    const oncallOriginal = spec.nodes.find((n) => n.id === "page_oncall")!.position!;
    expect(Math.min(route.x, oncall.x)).toBe(1000);
    expect(Math.min(route.y, oncall.y)).toBe(700);
    expect({ dx: oncall.x - route.x, dy: oncall.y - route.y }).toEqual({ dx: oncallOriginal.x - original.x, dy: oncallOriginal.y - original.y });
  });

  it("renews edge ids and ignores text that is not a fragment", () => {
    const s: GraphSpec = { name: "g", nodes: [{ id: "a", kind: "start", config: {} }, { id: "b", kind: "end", config: {} }], edges: [{ id: "e1", source: "a", target: "b" }] };
    const out = pasteFragment(s, copyFragment(s, new Set(["a", "b"]))).spec;
    expect(out.edges.map((e) => e.id)).toEqual(["e1", "e1_2"]);
    expect(parseFragment("hello")).toBeNull();
    expect(parseFragment('{"nodes": []}')).toBeNull();
  });
});

describe("auto-layout", () => {
  const sizes = new Map(spec.nodes.map((n) => [n.id, { width: 200, height: 80 }]));
  const order = (id: string) => nodeHandles(spec.nodes.find((n) => n.id === id)!, undefined,
    id === "route" ? { outputs: ["urgent", "default"] } : id === "review" ? { outputs: ["approved", "rejected"] } : { outputs: [] }, spec.edges).outputs;

  it("lays out left to right and keeps each router's handle order top to bottom", () => {
    const pos = layoutPositions(spec, sizes, order);
    expect(pos.size).toBe(spec.nodes.length);
    expect(pos.get("start")!.x).toBeLessThan(pos.get("classify")!.x);
    expect(pos.get("page_oncall")!.y).toBeLessThan(pos.get("search_kb")!.y);
    expect(pos.get("send_reply")!.y).toBeLessThan(pos.get("discard")!.y);
  });

  it("keeps handle order when the spec lists edges in the opposite order", () => {
    const flipped: GraphSpec = { ...spec, edges: [...spec.edges].reverse() };
    const reversedOrder = (id: string) => (id === "review" ? ["rejected", "approved"] : order(id));
    const pos = layoutPositions(flipped, sizes, reversedOrder);
    expect(pos.get("discard")!.y).toBeLessThan(pos.get("send_reply")!.y);
    expect(pos.get("page_oncall")!.y).toBeLessThan(pos.get("search_kb")!.y);
  });
});

describe("palette and drafts", () => {
  it("groups kinds by category and searches every text field", () => {
    expect(groupKinds(catalogue, "").map(([c]) => c)).toEqual(["flow", "ai", "tools", "logic", "people", "data"]);
    expect(groupKinds([...catalogue, kind("webhook", "integrations")], "web")).toEqual([["integrations", [kind("webhook", "integrations")]]]);
    expect(groupKinds(catalogue, "people")[0]?.[1].map((k) => k.kind)).toEqual(["approval"]);
  });

  it("summarises two drafts of one graph", () => {
    const theirs: GraphSpec = { ...spec, nodes: [...spec.nodes.filter((n) => n.id !== "discard"), { id: "extra", kind: "transform", config: {} }] };
    const mine: GraphSpec = { ...spec, nodes: spec.nodes.map((n) => (n.id === "route" ? { ...n, label: "Hot?" } : n)) };
    const d = diffDrafts(mine, theirs);
    expect(d).toEqual({ onlyMine: ["discard"], onlyTheirs: ["extra"], changed: ["route"], edgesMine: 11, edgesTheirs: 11, settingsDiffer: false });
  });
});
