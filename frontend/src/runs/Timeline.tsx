// The run page's timeline: every started step as a bar on one time axis, parallel branches in lanes side by side, attempts as segments.
import { useEffect, useState } from "react";
import { formatDuration, formatUsd } from "../shell/format";
import { stateColour, timelineLayout, timelineScale, type RunStep, type TimelineBreak } from "./runView";

const LANE_PX = 26;
/** The narrowest bar (px): a step of a few ms is still a target to click, and its colour shows. */
const MIN_BAR_PX = 8;
/** Bar states whose step is still open: its bar and its duration reach now. */
const OPEN_STATES = new Set(["running", "interrupted", "waiting", "parked"]);
/** Axis ticks this close (a share of the chart) to a break's label are left out: the label says the time there. */
const TICK_CLEARANCE = 0.07;

/** "47.9 s" for ``ms``, as the bars' durations read. */
function span(ms: number): string {
  return formatDuration(new Date(0).toISOString(), new Date(ms).toISOString());
}

/** What a break stands for, in words (its real length). */
function breakText(b: TimelineBreak): string {
  return `${span(b.to - b.from)} ${b.waiting ? "waiting" : "idle"}`;
}

/** "+1.2 s" from the chart's start, for the axis ticks. */
function offset(ms: number): string {
  if (ms < 1000) return `+${Math.round(ms)} ms`;
  if (ms < 60_000) return `+${(ms / 1000).toFixed(1)} s`;
  // Tenths after a long wait: the steps after it take seconds, and ticks must not read alike.
  return `+${Math.floor(ms / 60_000)} min ${((ms % 60_000) / 1000).toFixed(1).padStart(4, "0")} s`;
}

/** Now, ticking once a second while ``live`` (a running step's bar grows). */
function useNow(live: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!live) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [live]);
  return now;
}

/**
 * The timeline of ``steps``: one bar per started step (its state's colour), each attempt a
 * segment (a failed one hatched; the gap between two is the retry's backoff). Steps that
 * overlap in time sit in separate lanes. A long stretch in which no step worked (an approval
 * wait) is drawn short and hatched, with its real length written on it, so the steps around it
 * keep readable widths (timelineScale). Clicking a bar (or Enter on it) calls ``onOpen``.
 */
export function Timeline({ steps, live, selected, onOpen }: {
  steps: readonly RunStep[]; live: boolean; selected: number | null; onOpen: (step: RunStep) => void;
}) {
  const now = useNow(live);
  const layout = timelineLayout(steps, now);
  if (layout.bars.length === 0) return <p className="muted">No step has started yet.</p>;
  const scale = timelineScale(layout);
  const pct = (fraction: number) => `${fraction * 100}%`;
  const centres = scale.breaks.map((b) => b.x + b.width / 2);
  const ticks: { fx: number; ms: number; text: string }[] = [];
  for (const fx of [0, 0.25, 0.5, 0.75, 1]) {
    const ms = scale.time(fx);
    if (ms === null || centres.some((c) => Math.abs(c - fx) <= TICK_CLEARANCE)) continue;
    const tick = { fx, ms, text: offset(ms) };
    // After a break the rest may last a few ms: ticks that would read alike are one, at the end.
    if (ticks.length && ticks[ticks.length - 1]!.text === tick.text) ticks[ticks.length - 1] = tick;
    else ticks.push(tick);
  }
  return (
    <div className="timeline" role="list" aria-label="Timeline of steps">
      <div className="timeline__axis" aria-hidden="true">
        {ticks.map((t) => (
          // The end ticks align inward so they stay inside the chart.
          <span key={t.fx} style={{ left: pct(t.fx), transform: t.fx === 0 ? "none" : t.fx === 1 ? "translateX(-100%)" : "translateX(-50%)" }}>{t.text}</span>
        ))}
        {scale.breaks.map((b) => (
          <span key={b.from} className="timeline__break-label" style={{ left: pct(b.x + b.width / 2) }}>{breakText(b)}</span>
        ))}
      </div>
      <div className="timeline__lanes" style={{ height: layout.lanes * LANE_PX }}>
        {ticks.map((t) => <div key={t.fx} className="timeline__grid" style={{ left: pct(t.fx) }} aria-hidden="true" />)}
        {scale.breaks.map((b) => (
          <div key={b.from} className="timeline__break" style={{ left: pct(b.x), width: pct(b.width) }}
            title={`${breakText(b)}: no step worked then, so this stretch is not drawn to scale`} aria-hidden="true" />
        ))}
        {layout.bars.map((bar) => {
          const s = bar.step;
          // A step still open (working, at a gate, parked) has lasted until now so far.
          const duration = formatDuration(s.started_at, s.finished_at ?? (OPEN_STATES.has(bar.state) ? new Date(now).toISOString() : null));
          const label = `${s.node_id}${s.iteration > 0 ? ` #${s.iteration + 1}` : ""}: ${bar.state}, ${duration}${s.attempt > 1 ? `, ${s.attempt} attempts` : ""}`;
          const left = scale.x(bar.from);
          const width = scale.x(bar.to) - left;
          // Where in the bar (0..1 of its drawn width) a time falls.
          const within = (ms: number) => (width > 0 ? (scale.x(ms) - left) / width : 0);
          const waits = scale.breaks.filter((b) => b.from < bar.to && b.to > bar.from);
          return (
            <div
              key={s.id}
              role="listitem"
              className={`timeline__bar timeline__bar--${bar.state}${bar.child ? " timeline__bar--child" : ""}${selected === s.id ? " timeline__bar--selected" : ""}`}
              // A bar at the chart's end keeps its minimum width inside the chart, not past its edge.
              style={{ left: `min(${pct(left)}, calc(100% - ${MIN_BAR_PX}px))`, width: `max(${MIN_BAR_PX}px, ${pct(width)})`, top: bar.lane * LANE_PX, ["--state" as string]: stateColour(bar.state) }}
              data-step={s.id}
              data-node={s.node_id}
              data-lane={bar.lane}
              data-state={bar.state}
            >
              <button type="button" className="timeline__hit" onClick={() => onOpen(s)} aria-label={`Inspect ${label}`}
                title={`${label}${s.cost_usd ? ` · ${formatUsd(s.cost_usd)}` : ""}`}>
                {bar.segments.length > 1 && bar.segments.map((seg) => (
                  <span key={seg.number} className={`timeline__seg timeline__seg--${seg.status}`} aria-hidden="true"
                    style={{ left: pct(within(seg.from)), width: pct(within(seg.to) - within(seg.from)) }} />
                ))}
                {waits.map((b) => (
                  <span key={b.from} className="timeline__wait" aria-hidden="true"
                    style={{ left: pct(within(Math.max(b.from, bar.from))), width: pct(within(Math.min(b.to, bar.to)) - within(Math.max(b.from, bar.from))) }} />
                ))}
              </button>
              {/* The label may run past a short bar, up to the next bar in its lane (cqw: a share of
                  the lanes' width, which a bar drawn wider than its time cannot skew). */}
              <span className="timeline__label" aria-hidden="true" style={{ maxWidth: `calc(${(scale.x(bar.from + bar.room) - left) * 100}cqw - 4px)` }}>
                {s.node_id.includes("/") ? s.node_id.slice(s.node_id.indexOf("/") + 1) : s.node_id} <span className="timeline__dur">{duration}</span>
              </span>
            </div>
          );
        })}
      </div>
    </div>
  );
}
