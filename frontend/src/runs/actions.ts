// Run actions' logic, apart from React: shapes of the action/preview/compare API answers, the fork's
// state patch worked out from the edited JSON, problems found by path (with where they are in the text),
// and the preview's figures as words.
import type { ActionPreview, Estimate, RunComparison } from "../api/types";
import { formatUsd } from "../shell/format";

export type RunAction = "cancel" | "resume" | "retry" | "fork";

/**
 * Why retrying a failed run from its failed step would most likely fail the same way, or null
 * when it may well succeed. The engine stores with a run's error whether it is passing
 * (``retryable``: a timeout, a 503, a rate limit, which the node's retry policy would try again)
 * or not (an expression error, a template error, a request the provider refused): a retry
 * runs the same step of the same version on the same state, so a deterministic error comes
 * back unless something outside the run changed (an API key added). An error without the flag
 * (a budget stop, a rejection, an older run) gets no advice.
 */
export function retryAdvice(error: unknown): string | null {
  if (!error || typeof error !== "object") return null;
  const e = error as { retryable?: unknown; code?: unknown };
  if (e.retryable !== false) return null;
  const code = typeof e.code === "string" && e.code ? ` (${e.code})` : "";
  return `A retry will most likely fail again: this error${code} is not a passing one, and a retry reruns the same step of the same version on the same state. Fork from an earlier step with the state edited, or fix the graph, publish and start a new run.`;
}

/** The worst case of what runs again, as one line: "up to $0.012 · 1,250 tokens", with "+ unknown" for unpriced nodes. */
export function estimateText(preview: Pick<ActionPreview, "estimate">): string {
  const { usd, tokens, unpriced } = preview.estimate;
  const money = unpriced.length > 0 ? (Number(usd) > 0 ? `${formatUsd(usd)} + unknown` : "unknown") : formatUsd(usd);
  return `up to ${money} · ${tokens.toLocaleString("en-US")} token${tokens === 1 ? "" : "s"}`;
}

/** One step's estimate: "$0.004 · 120 tokens"; "unknown price · 120 tokens"; "free" for a node that costs nothing. */
export function stepEstimateText(estimate: Estimate | null): string {
  if (!estimate) return "counted in its parent";
  if (estimate.usd === null) return `unknown price · ${estimate.tokens.toLocaleString("en-US")} tokens`;
  if (Number(estimate.usd) === 0 && estimate.tokens === 0) return "free";
  return `${formatUsd(estimate.usd)} · ${estimate.tokens.toLocaleString("en-US")} tokens`;
}

// --------------------------------------------------------------------------- JSON positions

/** A problem in the edited state: ``path`` as the API writes it (``greeting``, ``items[0].sku``), where it is (offsets). */
export interface StateProblem {
  path: string;
  message: string;
  from: number;
  to: number;
  severity: "error" | "warning";
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** ``base`` extended by key ``key`` the way the server writes paths (runs/sandbox/values.py key_path). */
export function keyPath(base: string, key: string): string {
  if (IDENT.test(key)) return base ? `${base}.${key}` : key;
  return `${base}[${JSON.stringify(key)}]`;
}

/**
 * Where each value of a JSON text is: ``{path: [from, to]}`` for every object member (the span of its
 * key) and list item (the span of the item). ``""`` is the whole document. Stops quietly at the first
 * syntax error (what was found so far is returned): it only places messages, JSON.parse judges the text.
 */
export function jsonPositions(text: string): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  let i = 0;
  const ws = () => { while (i < text.length && /\s/.test(text[i]!)) i++; };
  const str = (): string | null => {
    if (text[i] !== '"') return null;
    const start = i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    if (i >= text.length) return null;
    i++;
    try { return JSON.parse(text.slice(start, i)) as string; } catch { return null; }
  };
  const value = (path: string, depth: number): boolean => {
    if (depth > 200) return false;
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      if (text[i] === "}") { i++; return true; }
      for (;;) {
        ws();
        const keyStart = i;
        const key = str();
        if (key === null) return false;
        const p = keyPath(path, key);
        out.set(p, [keyStart, i]);
        ws();
        if (text[i] !== ":") return false;
        i++;
        if (!value(p, depth + 1)) return false;
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return true; }
        return false;
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") { i++; return true; }
      for (let n = 0; ; n++) {
        ws();
        const start = i;
        const p = `${path}[${n}]`;
        if (!value(p, depth + 1)) return false;
        out.set(p, [start, i]);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return true; }
        return false;
      }
    }
    if (c === '"') return str() !== null;
    const m = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 400));
    if (!m) return false;
    i += m[0].length;
    return true;
  };
  ws();
  const docStart = i;
  value("", 0);
  out.set("", [docStart, Math.max(docStart, text.trimEnd().length)]);
  return out;
}

/** Where ``path`` is in ``positions``, or the nearest enclosing path that is found, else the whole text. */
export function placeOf(positions: Map<string, [number, number]>, path: string): [number, number] {
  let p = path;
  for (;;) {
    const hit = positions.get(p);
    if (hit) return hit;
    if (p === "") return [0, 0];
    const cut = Math.max(p.lastIndexOf("."), p.lastIndexOf("["));
    p = cut > 0 ? p.slice(0, cut) : "";
  }
}

// --------------------------------------------------------------------------- the fork's patch

export interface PatchResult {
  /** null when the text is not a JSON object (then ``problems`` says why). */
  patch: Record<string, unknown> | null;
  problems: StateProblem[];
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The state patch of a fork from ``text`` (the edited state, a JSON object) against ``original`` (the
 * state after the chosen step, less ``input``): the keys whose value changed or that were added.
 * Problems by path: not JSON or not an object; a key the graph does not know (``stateKeys``); ``input``
 * (the run's input is fixed); a removed key (a warning: the fork keeps its value).
 */
export function forkPatch(text: string, original: Record<string, unknown>, stateKeys: readonly string[]): PatchResult {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const message = err instanceof Error ? err.message : "not valid JSON";
    const at = /position (\d+)/.exec(message);
    const from = at ? Math.min(Number(at[1]), text.length) : 0;
    return { patch: null, problems: [{ path: "", message: `Not valid JSON: ${message}`, from, to: Math.min(text.length, from + 1), severity: "error" }] };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { patch: null, problems: [{ path: "", message: "The state must be a JSON object ({\"key\": value}).", from: 0, to: text.length, severity: "error" }] };
  }
  const positions = jsonPositions(text);
  const known = new Set(stateKeys);
  const problems: StateProblem[] = [];
  const patch: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    const path = keyPath("", key);
    const [from, to] = placeOf(positions, path);
    if (key === "input") {
      if (!same(value, original.input)) problems.push({ path, message: "The run's input cannot be changed by a fork; edit the state keys it set.", from, to, severity: "error" });
      continue;
    }
    if (!known.has(key)) {
      problems.push({ path, message: "not a state key of this graph", from, to, severity: "error" });
      continue;
    }
    if (!(key in original) || !same(value, original[key])) patch[key] = value;
  }
  for (const key of Object.keys(original)) {
    if (key !== "input" && !(key in (parsed as Record<string, unknown>))) {
      const [from, to] = placeOf(positions, "");
      problems.push({ path: keyPath("", key), message: "removed here, but a fork cannot remove a key: it keeps its value (set it to null instead)", from, to: Math.min(to, from + 1), severity: "warning" });
    }
  }
  return { patch, problems };
}

/**
 * The server's field errors for a fork (``state_patch.greeting``, ``state_patch.items[0]``) as problems
 * placed in ``text`` (paths relative to the state). Fields that are not about the patch are returned apart.
 */
export function serverProblems(fields: Record<string, string[]>, text: string): { problems: StateProblem[]; other: string[] } {
  const positions = jsonPositions(text);
  const problems: StateProblem[] = [];
  const other: string[] = [];
  for (const [field, messages] of Object.entries(fields)) {
    if (field === "state_patch" || field.startsWith("state_patch.") || field.startsWith("state_patch[")) {
      const path = field === "state_patch" ? "" : field.slice(field.startsWith("state_patch.") ? "state_patch.".length : "state_patch".length);
      const [from, to] = placeOf(positions, path);
      for (const message of messages) problems.push({ path, message, from, to, severity: "error" });
    } else {
      for (const message of messages) other.push(`${field}: ${message}`);
    }
  }
  return { problems, other };
}

/** The state shown for editing: the state after the step without ``input`` (fixed for a fork), pretty-printed. */
export function editableState(state: Record<string, unknown>): string {
  const { input: _input, ...rest } = state;
  void _input;
  return JSON.stringify(rest, null, 2);
}

// --------------------------------------------------------------------------- compare

/** How one node differs between the runs, in a word: "same", "different output", "only in A", "status differs", ... */
export function nodeDifference(row: RunComparison["nodes"][number]): string {
  if (!row.a && !row.b) return "ran in neither";
  if (!row.a) return "only in B";
  if (!row.b) return "only in A";
  if (row.a.status !== row.b.status) return "status differs";
  return row.same_output ? "same" : "different output";
}

/** A duration in seconds as "0.42 s", "3 min 05 s"; "—" for null. */
export function secondsText(seconds: number | null): string {
  if (seconds === null) return "—";
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(2) : seconds.toFixed(1)} s`;
  const min = Math.floor(seconds / 60);
  return `${min} min ${String(Math.floor(seconds % 60)).padStart(2, "0")} s`;
}

/** The compare page's URL for runs ``a`` and ``b``. */
export function compareUrl(a: number, b: number): string {
  return `/runs/compare/?a=${a}&b=${b}`;
}

/** The two run ids of a compare page's query string; null for a missing or malformed one. */
export function compareParams(search: string): { a: number | null; b: number | null } {
  const q = new URLSearchParams(search);
  const num = (v: string | null) => (v !== null && /^\d+$/.test(v) && Number(v) > 0 ? Number(v) : null);
  return { a: num(q.get("a")), b: num(q.get("b")) };
}
