// A table of runs (the run list and the home page's latest runs): status, graph, version, who, when, cost; optionally rows to tick.
import { formatDuration, formatUsd, queuePosition, queueReason, runDisplayStatus, startedBy, versionText } from "./format";
import { graphUrl, runUrl } from "./graphLinks";
import type { RunSummary } from "../api/types";
import { StatusBadge, When } from "./ui";

/** Ticking rows (the run list's bulk cancel and compare): which are ticked, and which may be. */
export interface RunSelection {
  selected: ReadonlySet<number>;
  /** Whether this run can be ticked; ``disabledTitle`` says why not. */
  allowed: (run: RunSummary) => boolean;
  onChange: (next: Set<number>) => void;
  disabledTitle?: string;
}

export function RunTable({ runs, compact = false, selection, label = "Runs" }: { runs: RunSummary[]; compact?: boolean; selection?: RunSelection; label?: string }) {
  const tickable = selection ? runs.filter(selection.allowed).map((r) => r.id) : [];
  const allTicked = selection !== undefined && tickable.length > 0 && tickable.every((id) => selection.selected.has(id));
  const toggle = (id: number) => {
    if (!selection) return;
    const next = new Set(selection.selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    selection.onChange(next);
  };
  const toggleAll = () => {
    if (!selection) return;
    const next = new Set(selection.selected);
    for (const id of tickable) if (allTicked) next.delete(id); else next.add(id);
    selection.onChange(next);
  };
  return (
    <div className="table-wrap">
      <table className={compact ? "table table-compact" : "table"} aria-label={label}>
        <thead>
          <tr>
            {selection ? (
              <th scope="col" className="tick">
                <input type="checkbox" aria-label="Select every run on this page" checked={allTicked}
                  disabled={tickable.length === 0} onChange={toggleAll} />
              </th>
            ) : null}
            <th scope="col">Run</th>
            <th scope="col">Status</th>
            <th scope="col">Graph</th>
            <th scope="col">Version</th>
            {compact ? null : <th scope="col">Started by</th>}
            <th scope="col">Started</th>
            {compact ? null : <th scope="col">Finished</th>}
            {compact ? null : <th scope="col">Duration</th>}
            <th scope="col" className="num">Cost</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((r) => (
            <tr key={r.id} data-run={r.id} data-status={r.status} className={selection?.selected.has(r.id) ? "row-selected" : undefined}>
              {selection ? (
                <td className="tick">
                  <input type="checkbox" aria-label={`Select run ${r.id}`} checked={selection.selected.has(r.id)}
                    disabled={!selection.allowed(r)} title={selection.allowed(r) ? undefined : selection.disabledTitle}
                    onChange={() => toggle(r.id)} />
                </td>
              ) : null}
              <td><a href={runUrl(r.id)}>#{r.id}</a></td>
              <td><StatusBadge status={runDisplayStatus(r)} />{r.queue ? <span className="small queue-place" title={queueReason(r.queue)}> {queuePosition(r.queue)}</span> : null}</td>
              <td className="col-graph"><a className="cell-graph" href={graphUrl(r.graph)} title={r.graph_name}>{r.graph_name}</a></td>
              <td>{versionText(r)}</td>
              {compact ? null : <td>{startedBy(r)}</td>}
              {/* Compact (the home page's card): the clock, with the day and how long ago under it, so the graph's column keeps its width. */}
              <td className="col-started">{compact ? <When at={r.started_at ?? r.created_at} date ago /> : <When at={r.started_at ?? r.created_at} date />}</td>
              {compact ? null : <td><When at={r.finished_at} date /></td>}
              {compact ? null : <td>{formatDuration(r.started_at, r.finished_at)}</td>}
              <td className="num">{formatUsd(r.cost_usd)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
