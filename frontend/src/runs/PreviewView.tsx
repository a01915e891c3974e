// What a resume, retry or fork will do, before it is done: steps kept from the checkpoint, steps that
// run again (and the nodes after them), and the worst-case cost of what runs.
import type { ActionPreview } from "../api/types";
import { formatUsd } from "../shell/format";
import { estimateText, stepEstimateText } from "./actions";

function iter(iteration: number): string {
  return iteration > 0 ? ` #${iteration + 1}` : "";
}

export function PreviewView({ preview }: { preview: ActionPreview }) {
  const fork = preview.action === "fork";
  const topKept = preview.kept.filter((k) => k.parent === null);
  const childKept = preview.kept.length - topKept.length;
  return (
    <div className="ra-preview" aria-label="Preview" role="group">
      <div className="ra-columns">
        <section aria-labelledby="ra-kept">
          <h3 id="ra-kept">Kept from the checkpoint <span className="ra-count">{topKept.length}</span></h3>
          <p className="field-help">
            {fork ? "Their outputs make the fork's state; they do not run again." : "Committed steps are facts: they never run again."}{" "}
            Spend kept: {formatUsd(preview.kept_cost_usd)}{childKept > 0 ? ` (with ${childKept} agent child step${childKept === 1 ? "" : "s"})` : ""}.
          </p>
          {topKept.length === 0 ? <p className="muted">None.</p> : (
            <ul className="ra-steps" aria-label="Kept steps">
              {topKept.map((k) => (
                <li key={k.step} className="ra-kept"><span className="ra-mark" aria-hidden="true">✓</span><code>{k.node_id}</code>{iter(k.iteration)}<span className="muted small">{k.cost_usd !== null && Number(k.cost_usd) > 0 ? formatUsd(k.cost_usd) : ""}</span></li>
              ))}
            </ul>
          )}
        </section>
        <section aria-labelledby="ra-again">
          <h3 id="ra-again">{fork ? "Runs in the fork" : "Runs again"} <span className="ra-count">{preview.run_again.length + preview.then.length}</span></h3>
          <p className="field-help">
            {fork ? "The steps after the chosen one start anew;" : preview.mode === "parked" ? "The interrupted steps are re-queued (same idempotency key);" : "The failed step gets fresh attempts;"}{" "}
            the nodes after them run as the graph routes.
          </p>
          <ul className="ra-steps" aria-label="Steps that run">
            {preview.run_again.map((r) => (
              <li key={`${r.node_id}:${r.iteration}:${r.step ?? ""}`} className="ra-again">
                <span className="ra-mark" aria-hidden="true">↻</span><code>{r.node_id}</code>{iter(r.iteration)}
                <span className="ra-badge">{r.status === "suspended" ? "re-runs its failed children" : r.step === null ? "starts" : preview.mode === "parked" ? "re-queued" : `${r.max_attempts} attempts`}</span>
                <span className="muted small">{stepEstimateText(r.estimate)}</span>
              </li>
            ))}
            {preview.then.map((t) => (
              <li key={`then:${t.node_id}`} className="ra-then">
                <span className="ra-mark" aria-hidden="true">→</span><code>{t.node_id}</code>
                <span className="ra-badge ra-badge-soft">then</span>
                <span className="muted small">{stepEstimateText(t.estimate)}</span>
              </li>
            ))}
          </ul>
        </section>
      </div>
      {fork && preview.dropped && preview.dropped.length > 0 ? (
        <p className="field-help">Not carried over from run #{preview.run}: {preview.dropped.map((d, i) => <span key={d.step}>{i > 0 ? ", " : ""}<code>{d.node_id}</code>{iter(d.iteration)}</span>)} (computed again in the fork).</p>
      ) : null}
      <p className="ra-estimate" aria-label="Estimated cost">
        <strong>Estimated cost:</strong> {estimateText(preview)}
        <span className="field-help"> — worst case of the costliest path (full max_tokens, every schema re-ask){preview.estimate.unpriced.length > 0 ? `; no known price for ${preview.estimate.unpriced.join(", ")}` : ""}.</span>
      </p>
    </div>
  );
}
