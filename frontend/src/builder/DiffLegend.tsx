// Above a compared graph on the builder's canvas: which versions, what the colours mean (with counts), and the way back.
import type { VersionDiff } from "../api/types";
import type { CanvasDiff } from "./Canvas";
import { Button } from "../shell/Button";

/** Two versions compared on the canvas: the server's diff and what each node and edge is marked. */
export interface Comparison {
  diff: VersionDiff;
  marks: CanvasDiff;
}

/** Above a compared graph: which versions, what the colours mean (with counts), and the way back. */
export function DiffLegend({ comparison, onClear }: { comparison: Comparison; onClear: () => void }) {
  const counts = { added: { nodes: 0, edges: 0 }, changed: { nodes: 0, edges: 0 }, removed: { nodes: 0, edges: 0 } };
  for (const change of Object.values(comparison.marks.nodes)) counts[change].nodes++;
  for (const change of Object.values(comparison.marks.edges)) counts[change].edges++;
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;
  const parts = ({ nodes, edges }: { nodes: number; edges: number }) =>
    [nodes ? plural(nodes, "node") : "", edges ? plural(edges, "edge") : ""].filter(Boolean).join(", ") || "none";
  const { from, to } = comparison.diff;
  return (
    <div className="diff-legend" role="region" aria-label="Comparison legend">
      <span className="diff-legend__title">Comparing version {from} → {to}</span>
      {(["added", "changed", "removed"] as const).map((change) => (
        <span key={change} className="diff-legend__key">
          <span className={`diff-legend__swatch diff-legend__swatch--${change}`} aria-hidden="true" />
          {change}: {parts(counts[change])}
        </span>
      ))}
      <span className="muted diff-legend__note" title="The draft is not changed by comparing">Showing version {to}, read-only</span>
      <span className="builder__spacer" />
      <Button onClick={onClear}>Close comparison</Button>
    </div>
  );
}
