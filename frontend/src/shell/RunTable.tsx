// A table of runs (the run list and the home page's latest runs): status, graph, version, who, when, cost.
import { formatDateTime, formatDuration, formatUsd, runDisplayStatus } from "./format";
import { graphUrl, runUrl } from "./graphLinks";
import type { RunSummary } from "./types";
import { StatusBadge } from "./ui";

/** ``selected``/``onToggle``: a checkbox per row (the run list's selection, e.g. to compare two runs). */
export function RunTable({ runs, compact = false, selected, onToggle }: {
  runs: RunSummary[];
  compact?: boolean;
  selected?: ReadonlySet<number>;
  onToggle?(id: number): void;
}) {
  const selectable = selected !== undefined && onToggle !== undefined;
  return (
    <div className="table-wrap">
      <table className={compact ? "table table-compact" : "table"}>
        <thead>
          <tr>
            {selectable ? <th scope="col"><span className="visually-hidden">Select</span></th> : null}
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
            <tr key={r.id} data-run={r.id}>
              {selectable ? <td><input type="checkbox" aria-label={`Select run ${r.id}`} checked={selected.has(r.id)} onChange={() => onToggle(r.id)} /></td> : null}
              <td><a href={runUrl(r.id)}>#{r.id}</a></td>
              <td><StatusBadge status={runDisplayStatus(r)} /></td>
              <td><a href={graphUrl(r.graph)}>{r.graph_name}</a></td>
              <td>v{r.version}</td>
              {compact ? null : <td>{r.created_by ?? "—"}</td>}
              <td>{formatDateTime(r.started_at ?? r.created_at)}</td>
              {compact ? null : <td>{formatDateTime(r.finished_at)}</td>}
              {compact ? null : <td>{formatDuration(r.started_at, r.finished_at)}</td>}
              <td className="num">{formatUsd(r.cost_usd)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
