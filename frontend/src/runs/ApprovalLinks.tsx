// The way from a waiting run to its decision: the run's pending approval requests (GET
// approvals/of-run/<run>/, for whoever may read the run) as "Decide…" links to /approvals/<id>/.
// The request's page says who may decide and refuses everyone else.
import type { RunApproval } from "../api/types";
import { ButtonLink } from "../shell/Button";
import { useApi } from "../shell/useApi";

/** The href of one request's page. */
export function approvalUrl(id: number): string {
  return `/approvals/${id}/`;
}

/**
 * The pending requests of run ``runId`` while ``waiting`` (the run waits at a gate or for a
 * decision), read again when ``revision`` changes (the run's last event seq); [] otherwise.
 */
export function useRunApprovals(runId: number, waiting: boolean, revision: number): RunApproval[] {
  const { data } = useApi<RunApproval[]>(waiting ? `approvals/of-run/${runId}/?r=${revision}` : null);
  return waiting && data ? data : [];
}

/** The link to decide ``approval`` (or open it, for a reader who may not decide). */
export function DecideLink({ approval, size = "small" }: { approval: RunApproval; size?: "small" | "normal" }) {
  const words = approval.may_decide ? "Decide…" : "Open approval request";
  return (
    <ButtonLink href={approvalUrl(approval.id)} size={size} variant={approval.may_decide ? "primary" : "default"}
      aria-label={`${words} for step ${approval.node_id} (request #${approval.id})`}>{words}</ButtonLink>
  );
}

/** The run page's notice of each step waiting at an approval gate, with its link (a parked step's request links from the page's "Waiting for a decision" notice). */
export function WaitingApprovals({ approvals }: { approvals: RunApproval[] }) {
  const gates = approvals.filter((a) => a.purpose === "gate");
  if (gates.length === 0) return null;
  return (
    <div className="alert alert-warning waiting-approvals" role="status" aria-label="Waiting at approval">
      {gates.map((a) => (
        <div key={a.id} className="waiting-approvals__item" data-approval={a.id}>
          <span><strong>Waiting at approval</strong> <code>{a.node_id}</code>
            {a.may_decide ? ": a person approves or rejects it on its request's page." : ": its request's page says who may decide it."}</span>
          <DecideLink approval={a} />
        </div>
      ))}
    </div>
  );
}
