// Keeping React Flow's node objects when nothing drawn changed: memoised node cards then skip the render (pure, no React).
import type { ValidationIssue } from "../api/types";
import { type FlowNode, type NodeHandles } from "./flow";

/** Same members, any order. */
export function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x));
}

/** Keep the previous React Flow node object when nothing drawn changed (memoised node components skip it). */
export function mergeNodes(prev: readonly FlowNode[], next: FlowNode[]): FlowNode[] {
  const byId = new Map(prev.map((n) => [n.id, n]));
  let same = prev.length === next.length;
  const out = next.map((n, i) => {
    const p = byId.get(n.id);
    if (!p) { same = false; return n; }
    const dataSame = p.data === n.data || shallowData(p.data as Record<string, unknown>, n.data as Record<string, unknown>);
    if (dataSame && p.position.x === n.position.x && p.position.y === n.position.y && !!p.selected === !!n.selected
      && p.width === n.width && p.height === n.height && p.draggable === n.draggable) {
      if (prev[i] !== p) same = false;
      return p;
    }
    same = false;
    return { ...n, measured: p.measured } as FlowNode;
  });
  return same ? (prev as FlowNode[]) : out;
}

function shallowData(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  // A key only one side has (a comparison's ``diff`` cleared) is a change too.
  if (Object.keys(a).length !== Object.keys(b).length) return false;
  for (const k of Object.keys(b)) {
    if (a[k] === b[k]) continue;
    if (k === "errors" && sameIssues(a[k] as ValidationIssue[], b[k] as ValidationIssue[])) continue;
    if (k === "handles" && sameHandles(a[k] as NodeHandles, b[k] as NodeHandles)) continue;
    return false;
  }
  return true;
}

/** Equal lists of strings. */
function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The same handles (compared field by field: every validation answer builds new ones for 300 nodes). */
function sameHandles(a: NodeHandles, b: NodeHandles): boolean {
  return a.hasInput === b.hasInput && a.defaultOutput === b.defaultOutput && sameStrings(a.inputs, b.inputs)
    && sameStrings(a.outputs, b.outputs) && sameStrings(a.optional, b.optional);
}

/** The same validation issues, in the same order. */
function sameIssues(a: readonly ValidationIssue[], b: readonly ValidationIssue[]): boolean {
  return a.length === b.length && a.every((x, i) => {
    const y = b[i] as ValidationIssue;
    return x.code === y.code && x.node === y.node && x.field === y.field && (x.path ?? null) === (y.path ?? null) && x.message === y.message;
  });
}
