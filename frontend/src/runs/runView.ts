// The run page's pure logic: each node's state from the run's steps, the timeline's lanes, a step's state difference.
import type { RunStep } from "../api/types";
import type { NodeRunMark } from "../builder/flow";
import type { GraphSpec } from "../builder/spec";
import { RUN_STATE_COLOURS } from "../builder/runStateColours";
import { formatDuration } from "../shell/format";

export type NodeState = NodeRunMark["state"];

const FINAL_RUN = new Set(["succeeded", "failed", "cancelled"]);
/** Step statuses whose bar reaches now: the step holds the run there (running, at a gate, parked for a decision). */
const OPEN_UNTIL_NOW = new Set(["running", "suspended", "waiting", "parked"]);

/**
 * A step's state as the canvas and the timeline show it: a pending step that already
 * failed an attempt is ``retrying`` (waiting for its backoff), a running step whose worker
 * stopped heartbeating is ``interrupted``, a step waiting for its children (an agent
 * between turns) is ``running``; the rest map one to one.
 */
export function stepState(step: Pick<RunStep, "status" | "attempt" | "error"> & { worker_alive?: boolean | null; kind?: string }): NodeState {
  // A "Call graph" step waiting for its child run is at work (in the child), not at a person's gate.
  if (step.status === "waiting" && step.kind === "subgraph") return "running";
  switch (step.status) {
    case "pending":
      return step.attempt > 0 && step.error ? "retrying" : "pending";
    case "running":
      // Worked out by the server from the lease and the worker's heartbeat (useLeaseWatch
      // reads the run again when a lease runs out, so this shows without an event).
      return step.worker_alive === false ? "interrupted" : "running";
    case "suspended":
      return "running";
    case "waiting":
    case "parked":
    case "succeeded":
    case "failed":
    case "cancelled":
      return step.status;
    default:
      return "pending";
  }
}

/**
 * What a node-test run's page draws of its test snapshot: the tested node alone. The
 * snapshot wires the node to an internal end node (the harness that ends the run) that is
 * no node of the user's graph, so neither it nor its edges are drawn or offered.
 */
export function testedNodeOnly(spec: GraphSpec, tested: string): GraphSpec {
  return { ...spec, nodes: spec.nodes.filter((n) => n.id === tested), edges: spec.edges.filter((e) => e.source === tested && e.target === tested) };
}

/**
 * A node-test run's steps as its page lists them: the tested node's steps and their
 * children (an agent's turns and calls), without the harness's end step, which is no
 * node of the user's graph (nothing to inspect or act on). Other runs: all their steps.
 */
export function stepsShown<T extends Pick<RunStep, "id" | "parent" | "node_id">>(steps: readonly T[], tested: string | null): readonly T[] {
  if (!tested) return steps;
  const kept = new Set<number>();
  return steps.filter((s) => {
    const ok = s.parent === null ? s.node_id === tested : kept.has(s.parent);
    if (ok) kept.add(s.id);
    return ok;
  });
}

/** The colour of a state (one table for cards, minimap and timeline). */
export function stateColour(state: NodeState): string {
  return RUN_STATE_COLOURS[state];
}

/**
 * Each graph node's mark in a run: the state of its latest top-level step (the last loop
 * iteration), with a detail line (attempt n of m, iterations, duration). A node with no
 * step is ``pending`` while the run is live and ``skipped`` once it has ended (a branch
 * the run never took), unless the run is a fork that kept its result from its source run
 * (``kept``: the source's run id and the kept nodes): then it is ``kept``, "from run #N".
 * Child steps (an agent's turns and calls) mark no node.
 */
export function nodeMarks(
  nodeIds: readonly string[], steps: readonly RunStep[], runStatus: string, kept?: { run: number; nodes: readonly string[] } | null,
): Record<string, NodeRunMark> {
  const keptNodes = new Set(kept?.nodes ?? []);
  const latest = new Map<string, RunStep>();
  const count = new Map<string, number>();
  for (const s of steps) {
    if (s.parent !== null) continue;
    count.set(s.node_id, (count.get(s.node_id) ?? 0) + 1);
    const prev = latest.get(s.node_id);
    if (!prev || s.iteration > prev.iteration || (s.iteration === prev.iteration && s.id > prev.id)) latest.set(s.node_id, s);
  }
  const out: Record<string, NodeRunMark> = {};
  for (const id of nodeIds) {
    const s = latest.get(id);
    if (!s) {
      out[id] = kept && keptNodes.has(id) ? { state: "kept", detail: `from run #${kept.run}` }
        : { state: FINAL_RUN.has(runStatus) ? "skipped" : "pending" };
      continue;
    }
    const state = stepState(s);
    const parts: string[] = [];
    const n = count.get(id) ?? 1;
    if (n > 1) parts.push(`${n} iterations`);
    if (s.attempt > 1 || state === "retrying") parts.push(`attempt ${s.attempt} of ${s.max_attempts}`);
    if (s.started_at && s.finished_at) parts.push(formatDuration(s.started_at, s.finished_at));
    const mark: NodeRunMark = { state };
    if (parts.length) mark.detail = parts.join(" · ");
    out[id] = mark;
  }
  return out;
}

/**
 * One attempt's bar in a step's row. ``from``/``to``: when it ran (ms since the chart's
 * start); ``drawTo``: where its bar ends, which for the step's last attempt is the step's own
 * end when the step stayed open after it (at a gate, parked, running: a later decision or now).
 */
export interface TimelineAttempt {
  number: number;
  status: string;
  errorCode: string | null;
  from: number;
  to: number;
  drawTo: number;
}

/**
 * The wait between a failed attempt (``after``) and the next: from the failed attempt's end to
 * the time the retry was due (``due``: as the engine recorded it), or, in an answer without the
 * due time, to the next attempt's start. It may end after now (a retry not due yet).
 */
export interface TimelineBackoff {
  after: number;
  from: number;
  to: number;
  due: boolean;
}

/** One row of the timeline: a step, each of its attempts as its own bar and the backoffs between them, in a lane. Times are ms since ``start`` of the chart. */
export interface TimelineBar {
  step: RunStep;
  state: NodeState;
  lane: number;
  /** Child steps (an agent's turns and calls) sit in their own lanes below, indented. */
  child: boolean;
  /** The row's extent: its first attempt's start to its end (or now), backoffs included. */
  from: number;
  to: number;
  attempts: TimelineAttempt[];
  backoffs: TimelineBackoff[];
  /** Room for the bar's label (ms from ``from``): up to the next bar in its lane, or the chart's end. */
  room: number;
}

export interface TimelineLayout {
  bars: TimelineBar[];
  lanes: number;
  /** Epoch ms of the chart's left edge and its width in ms (at least 1). */
  start: number;
  span: number;
}

/**
 * A step's attempts and backoffs in epoch ms, its row ending at ``to`` (see TimelineAttempt,
 * TimelineBackoff). A step without attempt spans (an older answer) is one attempt over its row.
 */
function attemptsOf(s: RunStep, from: number, to: number, now: number): { attempts: Omit<TimelineAttempt, "drawTo">[]; backoffs: TimelineBackoff[] } {
  const t = (iso: string | null | undefined) => (iso ? new Date(iso).getTime() : null);
  const spans = s.attempts ?? [];
  if (spans.length === 0) return { attempts: [{ number: Math.max(1, s.attempt), status: s.status, errorCode: null, from, to }], backoffs: [] };
  const attempts = spans.map((a) => {
    const af = t(a.started_at) ?? from;
    return { number: a.number, status: a.status, errorCode: a.error_code ?? null, from: af, to: Math.max(af, t(a.finished_at) ?? (OPEN_UNTIL_NOW.has(s.status) ? now : to)) };
  });
  const backoffs: TimelineBackoff[] = [];
  spans.forEach((a, i) => {
    if (a.status !== "failed") return; // a lost attempt is re-run by recovery at once: no backoff
    const next = spans[i + 1];
    const due = t(a.retry_at);
    // Older answers carry no due time (undefined): the wait then ends when the next attempt started.
    let end = due ?? (a.retry_at === undefined && next ? t(next.started_at) : null);
    if (end === null) return;
    const nextStart = next ? t(next.started_at) : null;
    if (nextStart !== null) end = Math.min(end, nextStart); // a person resumed it before it was due
    const start = attempts[i]!.to;
    if (end > start) backoffs.push({ after: a.number, from: start, to: end, due: due !== null });
  });
  return { attempts, backoffs };
}

/**
 * Lay the run's started steps out on a time axis: steps that overlap in time (parallel
 * branches, an agent's parallel tool calls) go in separate lanes, side by side in time;
 * a step goes in the first lane free at its start (greedy interval partitioning, in start
 * order), so a sequential run is one lane. A running, waiting or parked step reaches ``now``;
 * a step waiting for a retry reaches the retry's due time. Each attempt is its own bar in the
 * step's row, each backoff between two attempts its own segment. Steps that never started
 * have no bar.
 */
export function timelineLayout(steps: readonly RunStep[], now: number): TimelineLayout {
  const t = (iso: string | null | undefined, fallback: number) => (iso ? new Date(iso).getTime() : fallback);
  const started = steps
    .filter((s) => s.started_at)
    .map((s) => {
      // The first attempt's start: a step's started_at is its latest attempt's (a retry moves it).
      const first = s.attempts?.length ? t(s.attempts[0]!.started_at, now) : t(s.started_at, now);
      const from = Math.min(first, t(s.started_at, now));
      const end = Math.max(from, s.finished_at ? t(s.finished_at, now) : OPEN_UNTIL_NOW.has(s.status) ? now : lastAttemptEnd(s, from));
      const parts = attemptsOf(s, from, end, now);
      const to = Math.max(end, ...parts.backoffs.map((b) => b.to));
      return { s, from, to, end, parts };
    })
    .sort((a, b) => a.from - b.from || a.s.id - b.s.id);
  if (started.length === 0) return { bars: [], lanes: 0, start: now, span: 1 };
  const start = started[0]!.from;
  const end = Math.max(...started.map((x) => x.to));
  const laneEnds: number[] = [];
  const bars: TimelineBar[] = [];
  for (const { s, from, to, end: stepEnd, parts } of started) {
    // Touching is not overlapping: the next step of a chain starts when the last ended.
    let lane = laneEnds.findIndex((e) => e <= from);
    if (lane === -1) { lane = laneEnds.length; laneEnds.push(to); } else laneEnds[lane] = to;
    const last = parts.attempts.length - 1;
    const waitsAfterLast = parts.backoffs.some((b) => b.after === parts.attempts[last]!.number);
    const attempts = parts.attempts.map((a, i) => ({
      ...a, from: a.from - start, to: a.to - start,
      // The last attempt's bar runs on while its step stays open (at a gate until the decision, parked, running).
      drawTo: (i === last && !waitsAfterLast ? Math.max(a.to, stepEnd) : a.to) - start,
    }));
    const backoffs = parts.backoffs.map((b) => ({ ...b, from: b.from - start, to: b.to - start }));
    bars.push({ step: s, state: stepState(s), lane, child: s.parent !== null, from: from - start, to: to - start, attempts, backoffs, room: 0 });
  }
  const span = Math.max(1, end - start);
  const nextInLane = new Map<number, number>();
  for (let i = bars.length - 1; i >= 0; i--) {
    const b = bars[i]!;
    b.room = (nextInLane.get(b.lane) ?? span) - b.from;
    nextInLane.set(b.lane, b.from);
  }
  return { bars, lanes: laneEnds.length, start, span };
}

/**
 * A stretch of the chart in which no step did any work (every step open then sat at a gate,
 * was parked, or waited for its retry), drawn shorter than its length. ``from``/``to`` are ms
 * since the chart's start, as on the bars; ``x``/``width`` its place on the drawn axis (0..1).
 */
export interface TimelineBreak {
  from: number;
  to: number;
  x: number;
  width: number;
  /** True when some step was open through it (waiting); false when none was (idle). */
  waiting: boolean;
}

/** Where the chart's time is drawn: ``x(ms)`` is the left (0..1) of ``ms`` since the chart's start. */
export interface TimelineScale {
  x(ms: number): number;
  /** The ms since the chart's start drawn at ``x`` (0..1); null inside a break, where no one time is. */
  time(x: number): number | null;
  breaks: TimelineBreak[];
}

/** A break is drawn as long as this share of the time steps worked (so a 48 s wait beside 1 s of work takes about a tenth of the chart). */
const BREAK_SHARE = 0.12;
/** Shorter stretches without work are drawn to scale (a worker's pickup between two steps, a short backoff). */
const MIN_BREAK_MS = 2000;
/** A backoff up to this long is drawn to scale, as if it were work: the wait is part of the step's story. A longer one (a Retry-After of minutes) may be drawn short like any wait. */
const BACKOFF_TO_SCALE_MS = 30_000;

/**
 * The timeline's time axis, to scale except where no step worked: a long approval wait
 * (or a parked step, a long backoff, an idle queue) would otherwise make every other bar a
 * sliver. Work is the union of the bars' attempts and their backoffs of up to
 * ``BACKOFF_TO_SCALE_MS`` (a bar without attempt spans works from its start to its end, unless
 * it waits at a gate or is parked); a stretch without work of
 * ``MIN_BREAK_MS`` or more is drawn ``BREAK_SHARE`` of the work's length long, when that is
 * shorter. Durations in labels and titles stay the real ones; the breaks carry theirs.
 */
export function timelineScale(layout: TimelineLayout): TimelineScale {
  const span = layout.span;
  const work: [number, number][] = [];
  for (const b of layout.bars) {
    if (b.step.attempts?.length) for (const a of b.attempts) work.push([a.from, a.to]);
    else if (b.state !== "waiting" && b.state !== "parked") work.push([b.from, b.to]);
    for (const w of b.backoffs) if (w.to - w.from <= BACKOFF_TO_SCALE_MS) work.push([w.from, w.to]);
  }
  work.sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [f, t] of work) {
    const last = merged[merged.length - 1];
    if (last && f <= last[1]) last[1] = Math.max(last[1], t); else merged.push([f, t]);
  }
  const worked = merged.reduce((sum, [f, t]) => sum + (t - f), 0);
  const gaps: [number, number][] = [];
  let cursor = 0;
  for (const [f, t] of merged) { if (f > cursor) gaps.push([cursor, f]); cursor = Math.max(cursor, t); }
  if (cursor < span) gaps.push([cursor, span]);
  const drawn = worked * BREAK_SHARE;
  const cut = worked > 0 ? gaps.filter(([f, t]) => t - f >= MIN_BREAK_MS && t - f > drawn) : [];
  const removed = cut.reduce((sum, [f, t]) => sum + (t - f - drawn), 0);
  const total = Math.max(1, span - removed);
  // Display ms of real ms: minus what the breaks before it took out (and part of the one it is in).
  const display = (ms: number): number => {
    let out = ms;
    for (const [f, t] of cut) {
      if (ms <= f) break;
      out -= ms >= t ? t - f - drawn : (ms - f) * (1 - drawn / (t - f));
    }
    return out;
  };
  const x = (ms: number) => Math.min(1, Math.max(0, display(ms) / total));
  const time = (fx: number): number | null => {
    const d = fx * total;
    let removedBefore = 0;
    for (const [f, t] of cut) {
      const start = f - removedBefore;
      if (d < start) break;
      if (d <= start + drawn) return null;
      removedBefore += t - f - drawn;
    }
    return d + removedBefore;
  };
  // Waiting when a step was open through most of it (a gate's bar ends at the decision, a
  // little before the next step starts); idle when none was.
  const open = (f: number, t: number) => layout.bars.some((b) => Math.min(b.to, t) - Math.max(b.from, f) >= (t - f) / 2);
  return { x, time, breaks: cut.map(([f, t]) => ({ from: f, to: t, x: x(f), width: drawn / total, waiting: open(f, t) })) };
}

/**
 * ``layout`` with its lanes packed again by where the bars are drawn, not only by their times:
 * a bar is at least ``minWidth`` of the chart wide (a step of a few ms stays a target) and one
 * at the chart's end is drawn inside it, so a step that starts the moment the one before it in
 * its lane ended (the end after a quick retry) would be drawn over that step's last attempt and
 * take its clicks. Such a step goes to the next lane free where it is drawn. ``minWidth`` is a
 * share of the chart (0..1): the narrowest bar's pixels over the chart's. Room for labels
 * follows the new lanes. Returns a new layout; ``layout`` is not changed.
 */
export function packDrawnLanes(layout: TimelineLayout, scale: TimelineScale, minWidth: number): TimelineLayout {
  const laneEnds: number[] = [];
  const bars = layout.bars.map((b) => {
    const left = Math.min(scale.x(b.from), 1 - minWidth);
    const right = Math.max(scale.x(b.to), left + minWidth);
    // A hair of slack: touching bars of a chain (one's end is the next one's start) share a lane.
    let lane = laneEnds.findIndex((e) => e <= left + 1e-9);
    if (lane === -1) { lane = laneEnds.length; laneEnds.push(right); } else laneEnds[lane] = right;
    return { ...b, lane };
  });
  const nextInLane = new Map<number, number>();
  for (let i = bars.length - 1; i >= 0; i--) {
    const b = bars[i]!;
    b.room = (nextInLane.get(b.lane) ?? layout.span) - b.from;
    nextInLane.set(b.lane, b.from);
  }
  return { ...layout, bars, lanes: laneEnds.length };
}

function lastAttemptEnd(s: RunStep, from: number): number {
  const ends = (s.attempts ?? []).map((a) => (a.finished_at ? new Date(a.finished_at).getTime() : from));
  return ends.length ? Math.max(...ends) : from;
}

/** One key of a step's state difference: what it was before the step and after it. */
export interface StateChangeRow {
  key: string;
  change: "added" | "changed";
  before: unknown;
  after: unknown;
}

/** The state API's ``changed`` as rows sorted by key (``added``: the key did not exist before the step). */
export function stateChangeRows(changed: Readonly<Record<string, { before: unknown; after: unknown; added: boolean }>>): StateChangeRow[] {
  return Object.keys(changed).sort().map((key) => {
    const c = changed[key]!;
    return { key, change: c.added ? "added" : "changed", before: c.before, after: c.after };
  });
}

/**
 * The keys of ``after`` (a state) grouped for display: those the step changed first, then
 * the rest (unchanged), each sorted.
 */
export function stateKeysOrdered(state: Readonly<Record<string, unknown>>, changed: Readonly<Record<string, unknown>>): { key: string; changed: boolean }[] {
  const keys = Object.keys(state).sort();
  return [...keys.filter((k) => k in changed).map((key) => ({ key, changed: true })), ...keys.filter((k) => !(k in changed)).map((key) => ({ key, changed: false }))];
}
