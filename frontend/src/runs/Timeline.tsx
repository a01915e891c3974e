// The run page's timeline: every attempt of every started step as its own bar on one time axis, each backoff between attempts as a labelled segment, parallel branches in lanes side by side.
import type { RunStep } from "../api/types";
import { useLayoutEffect, useRef, useState, type RefObject } from "react";
import { epochMs, formatClock, formatFromStart, formatOffset, formatSpan, useNow } from "../lib/time";
import { formatDuration, formatUsd } from "../shell/format";
import { packDrawnLanes, stateColour, timelineLayout, timelineScale, type TimelineAttempt, type TimelineBackoff, type TimelineBar, type TimelineBreak } from "./runView";

const LANE_PX = 26;
/** The narrowest bar (px): a step of a few ms is still a target to click, and its colour shows. */
const MIN_BAR_PX = 8;
/** The chart's width (px) until it is measured (and where nothing is laid out, as in jsdom). */
const ASSUMED_WIDTH_PX = 800;
/** Bar states whose step is still open: its bar and its duration reach now. */
const OPEN_STATES = new Set(["running", "interrupted", "waiting", "parked"]);
/** Axis ticks this close (a share of the chart) to a break's label are left out: the label says the time there. */
const TICK_CLEARANCE = 0.07;

/** What a break stands for, in words (its real length). */
function breakText(b: TimelineBreak): string {
  return `${formatSpan(b.to - b.from)} ${b.waiting ? "waiting" : "idle"}`;
}

/** "backoff 2.0 s": a backoff's label (its real length). */
export function backoffText(b: TimelineBackoff): string {
  return `backoff ${formatSpan(b.to - b.from)}`;
}

/** An attempt's title: "ask · attempt 1 of 3: failed (http_error) · 20:31:05.123 → 20:31:05.135, 12 ms · +0.250 s from run start". */
export function attemptTitle(step: RunStep, a: TimelineAttempt, chartStart: number, origin: string | null | undefined, now: number): string {
  const begin = chartStart + a.from;
  const end = chartStart + a.to;
  const open = a.status === "running" && OPEN_STATES.has(step.status);
  const outcome = `${a.status}${a.errorCode ? ` (${a.errorCode})` : ""}`;
  const when = `${formatClock(begin)} → ${open ? `now (${formatClock(now)})` : formatClock(end)}, ${formatSpan(end - begin)}`;
  const from = formatFromStart(begin, origin ?? null);
  return [`${step.node_id} · attempt ${a.number} of ${Math.max(step.max_attempts, a.number)}: ${outcome}`, when, from].filter(Boolean).join(" · ");
}

/** A backoff's title: "backoff 2.0 s after attempt 1: attempt 2 due 20:31:07.135 (+2.250 s from run start)". */
function backoffTitle(b: TimelineBackoff, chartStart: number, origin: string | null | undefined): string {
  const due = chartStart + b.to;
  const from = formatFromStart(due, origin ?? null);
  return `${backoffText(b)} after attempt ${b.after}: attempt ${b.after + 1} ${b.due ? "due" : "started"} ${formatClock(due)}${from ? ` (${from})` : ""}`;
}

/**
 * The timeline of ``steps``: one row per started step (in its state's colour), each attempt
 * its own bar in that row (a failed one hatched, its number, outcome and error code in its
 * title), each backoff between a failed attempt and the next a dashed segment labelled with
 * its length. Steps that overlap in time sit in separate lanes. A long stretch in which no step
 * worked (an approval wait) is drawn short and hatched, with its real length written on it, so
 * the steps around it keep readable widths (timelineScale). The axis reads from ``origin`` (the
 * run's start: "+1.250 s"). Clicking an attempt's bar (or Enter on it) calls ``onOpen``.
 */
export function Timeline({ steps, live, selected, onOpen, origin }: {
  steps: readonly RunStep[]; live: boolean; selected: number | null; onOpen: (step: RunStep) => void; origin?: string | null;
}) {
  const now = useNow(live ? 1000 : null);
  const lanesRef = useRef<HTMLDivElement>(null);
  const timed = timelineLayout(steps, now);
  const width = useChartWidth(lanesRef, timed.bars.length > 0);
  if (timed.bars.length === 0) return <p className="muted">No step has started yet.</p>;
  const scale = timelineScale(timed);
  // Lanes by where bars are drawn: a bar's minimum width must not cover the next one's clicks.
  const layout = packDrawnLanes(timed, scale, MIN_BAR_PX / width);
  const pct = (fraction: number) => `${fraction * 100}%`;
  // The axis counts from the run's start (the chart starts at its first step, a few ms later).
  const shift = (epochMs(origin) ?? layout.start) - layout.start;
  const centres = scale.breaks.map((b) => b.x + b.width / 2);
  const ticks: { fx: number; ms: number; text: string }[] = [];
  for (const fx of [0, 0.25, 0.5, 0.75, 1]) {
    const ms = scale.time(fx);
    if (ms === null || centres.some((c) => Math.abs(c - fx) <= TICK_CLEARANCE)) continue;
    const tick = { fx, ms, text: formatOffset(ms - shift) };
    // After a break the rest may last a few ms: ticks that would read alike are one, at the end.
    if (ticks.length && ticks[ticks.length - 1]!.text === tick.text) ticks[ticks.length - 1] = tick;
    else ticks.push(tick);
  }
  return (
    <div className="timeline" role="list" aria-label="Timeline of steps">
      <div className="timeline__axis" aria-hidden="true">
        {ticks.map((t) => (
          // The end ticks align inward so they stay inside the chart.
          <span key={t.fx} title={formatClock(layout.start + t.ms)} style={{ left: pct(t.fx), transform: t.fx === 0 ? "none" : t.fx === 1 ? "translateX(-100%)" : "translateX(-50%)" }}>{t.text}</span>
        ))}
        {scale.breaks.map((b) => (
          <span key={b.from} className="timeline__break-label" style={{ left: pct(b.x + b.width / 2) }}>{breakText(b)}</span>
        ))}
      </div>
      <div ref={lanesRef} className="timeline__lanes" style={{ height: layout.lanes * LANE_PX }}>
        {ticks.map((t) => <div key={t.fx} className="timeline__grid" style={{ left: pct(t.fx) }} aria-hidden="true" />)}
        {scale.breaks.map((b) => (
          <div key={b.from} className="timeline__break" style={{ left: pct(b.x), width: pct(b.width) }}
            title={`${breakText(b)}: no step worked then, so this stretch is not drawn to scale`} aria-hidden="true" />
        ))}
        {layout.bars.map((bar) => <Row key={bar.step.id} bar={bar} scale={scale} chartStart={layout.start} origin={origin} now={now} selected={selected === bar.step.id} onOpen={onOpen} />)}
      </div>
    </div>
  );
}

/** The width (px) of the element in ``ref`` (mounted while ``shown``), kept up to date as it resizes; ASSUMED_WIDTH_PX until measured. */
function useChartWidth(ref: RefObject<HTMLDivElement | null>, shown: boolean): number {
  const [width, setWidth] = useState(ASSUMED_WIDTH_PX);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return undefined;
    const measure = () => { if (el.clientWidth > 0) setWidth(el.clientWidth); };
    measure();
    const watch = new ResizeObserver(measure);
    watch.observe(el);
    return () => watch.disconnect();
  }, [ref, shown]);
  return width;
}

/** One step's row: its attempts' bars, the backoffs between them, and its label (at its last attempt). */
function Row({ bar, scale, chartStart, origin, now, selected, onOpen }: {
  bar: TimelineBar; scale: ReturnType<typeof timelineScale>; chartStart: number; origin?: string | null; now: number; selected: boolean; onOpen: (step: RunStep) => void;
}) {
  const s = bar.step;
  const pct = (fraction: number) => `${fraction * 100}%`;
  // A step still open (working, at a gate, parked) has lasted until now so far.
  const duration = formatDuration(s.started_at, s.finished_at ?? (OPEN_STATES.has(bar.state) ? new Date(now).toISOString() : null));
  const name = `${s.node_id}${s.iteration > 0 ? ` #${s.iteration + 1}` : ""}`;
  const left = scale.x(bar.from);
  const width = scale.x(bar.to) - left;
  // Where in the row (0..1 of its drawn width) a time falls.
  const within = (ms: number) => (width > 0 ? (scale.x(ms) - left) / width : 0);
  const piece = (from: number, to: number) => ({ left: pct(within(from)), width: pct(Math.max(0, within(to) - within(from))) });
  const waits = scale.breaks.filter((b) => b.from < bar.to && b.to > bar.from);
  const last = bar.attempts[bar.attempts.length - 1]!;
  const cost = s.cost_usd ? ` · ${formatUsd(s.cost_usd)}` : "";
  return (
    <div
      role="listitem"
      className={`timeline__bar timeline__bar--${bar.state}${bar.child ? " timeline__bar--child" : ""}${selected ? " timeline__bar--selected" : ""}`}
      // A row at the chart's end keeps its minimum width inside the chart, not past its edge.
      style={{ left: `min(${pct(left)}, calc(100% - ${MIN_BAR_PX}px))`, width: `max(${MIN_BAR_PX}px, ${pct(width)})`, top: bar.lane * LANE_PX, ["--state" as string]: stateColour(bar.state) }}
      data-step={s.id}
      data-node={s.node_id}
      data-lane={bar.lane}
      data-state={bar.state}
    >
      {bar.attempts.map((a) => {
        const title = attemptTitle(s, a, chartStart, origin, now);
        return (
          <button key={a.number} type="button" className={`timeline__hit timeline__attempt timeline__attempt--${a.status}`} onClick={() => onOpen(s)}
            data-attempt={a.number} data-status={a.status} aria-label={`Inspect ${name}: ${bar.state}, ${duration}; attempt ${a.number}: ${a.status}${a.errorCode ? ` (${a.errorCode})` : ""}`}
            title={`${title}${a === last ? cost : ""}`}
            // The minimum width keeps an attempt of a few ms a target; the last one is never pushed past the row's end.
            style={{ ...piece(a.from, a.drawTo), minWidth: bar.attempts.length > 1 ? 4 : undefined }}>
            {waits.filter((b) => b.from < a.drawTo && b.to > a.from).map((b) => {
              const f = Math.max(b.from, a.from);
              const t = Math.min(b.to, a.drawTo);
              const span = a.drawTo - a.from;
              return <span key={b.from} className="timeline__wait" aria-hidden="true" style={{ left: pct(span > 0 ? (f - a.from) / span : 0), width: pct(span > 0 ? (t - f) / span : 0) }} />;
            })}
          </button>
        );
      })}
      {bar.backoffs.map((b) => (
        <span key={b.after} className="timeline__backoff" data-after={b.after} title={backoffTitle(b, chartStart, origin)} style={piece(b.from, b.to)}>
          <span className="timeline__backoff-text">{backoffText(b)}</span>
        </span>
      ))}
      {/* The label sits at the last attempt (the one that counts) and may run past a short bar, up to
          the next bar in its lane (cqw: a share of the lanes' width, which a bar drawn wider than its time cannot skew). */}
      <span className="timeline__label" aria-hidden="true"
        style={{ left: `calc(${pct(within(last.from))} + 6px)`, maxWidth: `calc(${(scale.x(bar.from + bar.room) - scale.x(last.from)) * 100}cqw - 4px)` }}>
        {s.node_id.includes("/") ? s.node_id.slice(s.node_id.indexOf("/") + 1) : s.node_id} <span className="timeline__dur">{duration}</span>
      </span>
    </div>
  );
}
