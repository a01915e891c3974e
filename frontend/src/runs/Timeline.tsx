// The run page's timeline: every started step as a bar on one time axis, parallel branches in lanes side by side, attempts as segments.
import { useEffect, useState } from "react";
import { formatDuration, formatUsd } from "../shell/format";
import { stateColour, timelineLayout, type RunStep } from "./runView";

const LANE_PX = 26;

/** "+1.2 s" from the chart's start, for the axis ticks. */
function offset(ms: number): string {
  if (ms < 1000) return `+${Math.round(ms)} ms`;
  if (ms < 60_000) return `+${(ms / 1000).toFixed(1)} s`;
  return `+${Math.floor(ms / 60_000)} min ${String(Math.floor((ms % 60_000) / 1000)).padStart(2, "0")} s`;
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
 * overlap in time sit in separate lanes. Clicking a bar (or Enter on it) calls ``onOpen``.
 */
export function Timeline({ steps, live, selected, onOpen }: {
  steps: readonly RunStep[]; live: boolean; selected: number | null; onOpen: (step: RunStep) => void;
}) {
  const now = useNow(live);
  const layout = timelineLayout(steps, now);
  if (layout.bars.length === 0) return <p className="muted">No step has started yet.</p>;
  const pct = (ms: number) => `${(ms / layout.span) * 100}%`;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => f * layout.span);
  return (
    <div className="timeline" role="list" aria-label="Timeline of steps">
      <div className="timeline__axis" aria-hidden="true">
        {ticks.map((t, i) => <span key={i} style={{ left: pct(t) }}>{offset(t)}</span>)}
      </div>
      <div className="timeline__lanes" style={{ height: layout.lanes * LANE_PX }}>
        {ticks.map((t, i) => <div key={i} className="timeline__grid" style={{ left: pct(t) }} aria-hidden="true" />)}
        {layout.bars.map((bar) => {
          const s = bar.step;
          const duration = formatDuration(s.started_at, s.finished_at ?? (bar.state === "running" ? new Date(now).toISOString() : null));
          const label = `${s.node_id}${s.iteration > 0 ? ` #${s.iteration + 1}` : ""}: ${bar.state}, ${duration}${s.attempt > 1 ? `, ${s.attempt} attempts` : ""}`;
          return (
            <div
              key={s.id}
              role="listitem"
              className={`timeline__bar timeline__bar--${bar.state}${bar.child ? " timeline__bar--child" : ""}${selected === s.id ? " timeline__bar--selected" : ""}`}
              style={{ left: pct(bar.from), width: `max(6px, ${pct(bar.to - bar.from)})`, top: bar.lane * LANE_PX, ["--state" as string]: stateColour(bar.state) }}
              data-step={s.id}
              data-node={s.node_id}
              data-lane={bar.lane}
              data-state={bar.state}
            >
              <button type="button" className="timeline__hit" onClick={() => onOpen(s)} aria-label={`Inspect ${label}`}
                title={`${label}${s.cost_usd ? ` · ${formatUsd(s.cost_usd)}` : ""}`}>
                {bar.segments.length > 1 && bar.segments.map((seg) => (
                  <span key={seg.number} className={`timeline__seg timeline__seg--${seg.status}`} aria-hidden="true"
                    style={{ left: `${((seg.from - bar.from) / Math.max(1, bar.to - bar.from)) * 100}%`, width: `${((seg.to - seg.from) / Math.max(1, bar.to - bar.from)) * 100}%` }} />
                ))}
              </button>
              {/* The label may run past a short bar, up to the next bar in its lane. */}
              <span className="timeline__label" aria-hidden="true" style={{ maxWidth: `calc(${(bar.room / Math.max(1, bar.to - bar.from)) * 100}% - 4px)` }}>
                {s.node_id.includes("/") ? s.node_id.slice(s.node_id.indexOf("/") + 1) : s.node_id} <span className="timeline__dur">{duration}</span>
              </span>
            </div>
          );
        })}
      </div>
    </div>
  );
}
