// One approval request opened in the inbox: what the run would do next, its state, votes and claim, and the decision form.
import type { Approval } from "../api/types";
import { Suspense, lazy, useCallback, useEffect, useMemo, useState } from "react";
import { api, ApiError } from "../lib/api";
import { usePageContext } from "../lib/context";
import { useConnection, useRunsChanged } from "../lib/useLiveEvents";
import { APPROVALS_CHANGED } from "../shell/TopBar";
import { formatDateTime, formatUsd } from "../shell/format";
import { ErrorMessage, Skeleton, StatusBadge } from "../shell/ui";
import { changeNote, conflictMessage, costLine, deadlineState, isStale, FALLBACK_POLL_MS, LIVE_DEBOUNCE_MS } from "./inbox";
import { useNow, DeadlineBadge } from "./DeadlineBadge";
import { Button } from "../shell/Button";

// rjsf and ajv (about 90 KB gzipped) load when someone ticks "Approve with changed values", not with the inbox.
const ApprovalEditForm = lazy(() => import("./ApprovalEditForm"));

/** One request: what approving does, the state, cost and budget, votes, and the decision form bound to the version shown. */
export function ApprovalDetail({ approvalId, onChanged }: { approvalId: number; onChanged: () => void }) {
  const me = usePageContext().user?.username ?? "";
  const [shown, setShown] = useState<Approval | null>(null);
  const [latest, setLatest] = useState<Approval | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [comment, setComment] = useState("");
  const [reason, setReason] = useState("");
  const [editing, setEditing] = useState(false);
  const [values, setValues] = useState<Record<string, unknown>>({});
  const [skipOutput, setSkipOutput] = useState("{}");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  // Someone else (or its deadline) closed the request while it was on screen.
  const [closedLive, setClosedLive] = useState(false);

  const fetchItem = useCallback(() => {
    api<Approval>(`approvals/${approvalId}/`)
      .then((a) => {
        setLatest(a);
        // A request that closed meanwhile has no decision left to bind to the version on
        // screen: show it as it is now (who decided, or that it timed out) at once.
        setShown((s) => {
          if (s === null) return a;
          if (s.status === "pending" && a.status !== "pending") {
            if (a.decided_by !== me) setClosedLive(true);
            return a;
          }
          return s;
        });
        setLoadError(null);
      })
      .catch((err: unknown) => setLoadError(err));
  }, [approvalId, me]);
  useEffect(fetchItem, [fetchItem]);
  // Live: any event of the item's run (a claim, a vote, someone's decision, its deadline,
  // the run resuming) fetches it again, so the page shows who did what without a reload.
  useRunsChanged(latest ? [{ id: latest.run, event_seq: latest.run_event_seq }] : undefined, fetchItem, LIVE_DEBOUNCE_MS);
  // No live run stream (a server without WebSockets, or reconnecting): fetch the item
  // every FALLBACK_POLL_MS while it is still open, as the list does.
  const runStream = useConnection();
  const stillOpen = latest === null || latest.status === "pending";
  useEffect(() => {
    if (runStream === "open" || !stillOpen) return;
    const timer = window.setInterval(() => { if (document.visibilityState !== "hidden") fetchItem(); }, FALLBACK_POLL_MS);
    return () => window.clearInterval(timer);
  }, [runStream, stillOpen, fetchItem]);
  const now = useNow(Boolean(latest?.due_at && latest.status === "pending" && !latest.escalated_at));

  const showLatest = () => {
    if (latest) setShown(latest);
    setError(null);
    setDone(null);
  };

  const editKeys = useMemo(() => Object.keys((shown?.edit_schema?.properties as Record<string, unknown> | undefined) ?? {}), [shown]);
  useEffect(() => {
    if (!shown) return;
    const current: Record<string, unknown> = {};
    for (const key of editKeys) if (key in shown.state) current[key] = shown.state[key];
    setValues(current);
  }, [shown, editKeys]);

  if (loadError && !shown) return <ErrorMessage error={loadError} title="This request could not be loaded." onRetry={fetchItem} />;
  if (!shown) return <div className="card"><Skeleton lines={6} label="Loading the request…" /></div>;

  const note = latest ? changeNote(shown, latest) : null;
  const pending = shown.status === "pending";
  const heldByOther = shown.claimed_by !== "" && shown.claimed_by !== me;
  // Once the server has it decided (by someone else), there is nothing left to decide here.
  const canAct = pending && shown.may_decide && !heldByOther && (latest === null || latest.status === "pending");

  async function act(path: string, body?: Record<string, unknown>, success?: string) {
    setBusy(true);
    setError(null);
    try {
      const result = await api<Approval>(`approvals/${approvalId}/${path}`, { method: "POST", body: body ?? {} });
      setShown(result);
      setLatest(result);
      setDone(success ?? null);
      setComment("");
      onChanged();
      window.dispatchEvent(new Event(APPROVALS_CHANGED));
    } catch (err) {
      setError(err);
      fetchItem();
    } finally {
      setBusy(false);
    }
  }

  const decide = (decision: string) => {
    const body: Record<string, unknown> = { decision, comment, version: shown.version };
    if (decision === "reject" && shown.reject_reasons.length) body.reason = reason;
    if (decision === "approve" && editing && shown.edit_schema) body.values = values;
    if (decision === "skip") {
      try {
        body.output = JSON.parse(skipOutput) as unknown;
      } catch {
        setError(new Error("The output is not JSON: write an object such as {\"key\": \"value\"}."));
        return;
      }
    }
    const said = { approve: "Approved", reject: "Rejected", retry: "Retrying the step", skip: "Skipped", fail: "Failed the run" }[decision] ?? "Done";
    void act("decide/", body, `${said}. The run continues on its own.`);
  };

  const votesLeft = shown.quorum - shown.votes.length;
  const deadline = deadlineState(latest ?? shown, now);
  return (
    <article className="card inbox-card" aria-labelledby="inbox-detail-title">
      <div className="inbox-detail-head">
        <div>
          <h2 id="inbox-detail-title">{shown.purpose === "recovery" ? "Parked step" : "Approval"} · {shown.graph_name}</h2>
          <div className="muted">
            <a href={`/runs/${shown.run}/`}>Run {shown.run}</a> at <code>{shown.node_id}</code> · asked <span className="nowrap">{formatDateTime(shown.created_at)}</span>
            {shown.started_by ? ` · started by ${shown.started_by}` : ""}
          </div>
        </div>
        <StatusBadge status={shown.status} />
      </div>

      {note ? (
        <div className="alert alert-warning" role="alert">
          <span>Changed since you opened it: {note}</span>
          <div><Button size="small" onClick={showLatest}>Show the latest</Button></div>
        </div>
      ) : null}

      <p className="inbox-prompt">{shown.prompt}</p>

      <div className="inbox-facts">
        <div><span className="muted">Cost</span> {costLine(shown.cost_usd, shown.budget_usd, formatUsd)}</div>
        <div><span className="muted">Who decides</span> {describeDeciders(shown)}</div>
        {shown.claimed_by ? <div><span className="muted">Claimed by</span> {shown.claimed_by}</div> : null}
        {deadline ? (
          <div className={`inbox-deadline-line inbox-deadline-line-${deadline.tone}`}>
            <span className="muted">Deadline</span> {shown.deadline ? <span>{shown.deadline}</span> : null} <DeadlineBadge item={latest ?? shown} now={now} />
            {pending || deadline.tone === "escalated" ? <span>{deadline.detail}</span> : null}
          </div>
        ) : null}
        {shown.quorum > 1 ? (
          <div><span className="muted">Approvals</span> {shown.votes.length} of {shown.quorum}{shown.votes.length ? ` (${shown.votes.map((v) => v.by).join(", ")})` : ""}
            {!shown.starter_counts ? <span className="inbox-aside"> · the run's starter does not count</span> : null}</div>
        ) : null}
      </div>

      <h3>{nextHeading(shown)}</h3>
      {shown.next_actions.length === 0 ? <p className="muted">Nothing more: the run ends after this gate.</p> : null}
      {shown.next_actions.map((a) => (
        <div key={a.node_id} className="inbox-action">
          <div className="inbox-action-head"><strong>{a.label || a.node_id}</strong> <span className="badge badge-plain">{a.kind}</span></div>
          <dl className="inbox-args">
            {Object.entries(a.arguments).map(([k, v]) => (
              <div key={k}><dt>{k}</dt><dd><Value value={v} /></dd></div>
            ))}
          </dl>
        </div>
      ))}

      <details className="inbox-state" open={Object.keys(shown.state).length <= 6}>
        <summary>Run state{Object.keys(shown.state).length ? ` (${Object.keys(shown.state).length} ${Object.keys(shown.state).length === 1 ? "key" : "keys"})` : ""}</summary>
        <pre>{JSON.stringify(shown.state, null, 2)}</pre>
      </details>

      {!pending ? (
        <div className={`alert${closedLive ? " alert-warning" : ""}`} role="status">
          {closedLive ? "While you had it open, " : ""}
          {shown.status === "cancelled" ? `${closedLive ? "it was closed" : "Closed"}: the run ended before a decision.` : shown.status === "expired" ? (
            <span>{closedLive ? "it timed out" : "Timed out"} on {formatDateTime(shown.decided_at)}: nobody decided within {shown.deadline ?? "its deadline"}, so the run took its timeout path.</span>
          ) : (
            <span><strong>{shown.decided_by}</strong> {DONE_WORDS[shown.decision] ?? shown.status} this on {formatDateTime(shown.decided_at)}
              {shown.reason ? ` (reason: ${shown.reason})` : ""}{shown.comment ? `: “${shown.comment}”` : ""}.</span>
          )}
        </div>
      ) : null}
      {done ? <div className="alert alert-success" role="status">{done}</div> : null}
      {error ? (
        <div className="alert alert-error" role="alert">
          <span>{conflictMessage(error)}</span>
          {error instanceof ApiError && Object.keys(error.fields).length ? (
            <ul className="field-errors">{Object.entries(error.fields).map(([p, m]) => <li key={p}><code>{p}</code>: {m.join(" ")}</li>)}</ul>
          ) : null}
          {isStale(error) ? <div><Button size="small" onClick={showLatest}>Show the latest</Button></div> : null}
        </div>
      ) : null}

      {canAct ? (
        <div className="inbox-claim">
          {shown.claimed_by === "" ? (
            <Button size="small" disabled={busy} onClick={() => act("claim/", undefined, "Claimed: only you can decide it until you hand it back.")}>Claim</Button>
          ) : shown.claimed_by === me ? (
            <Button size="small" disabled={busy} onClick={() => act("hand-back/", undefined, "Handed back to the group.")}>Hand back</Button>
          ) : null}
        </div>
      ) : null}

      {pending && shown.may_decide && heldByOther ? (
        <p className="muted">{shown.claimed_by} claimed it: they decide it unless they hand it back.</p>
      ) : null}

      {canAct ? (
        <form className="inbox-decide" onSubmit={(e) => e.preventDefault()} aria-label="Decision">
          <label className="field">
            <span>Comment</span>
            <textarea value={comment} onChange={(e) => setComment(e.target.value)} rows={2} placeholder="Why (kept with the decision and in the audit log)" />
          </label>
          {shown.purpose === "gate" && shown.reject_reasons.length ? (
            <label className="field">
              <span>Reason, if you reject</span>
              <select value={reason} onChange={(e) => setReason(e.target.value)}>
                <option value="">Choose a reason…</option>
                {shown.reject_reasons.map((r) => <option key={r} value={r}>{r}</option>)}
              </select>
            </label>
          ) : null}
          {shown.purpose === "gate" && shown.edit_schema ? (
            <div className="inbox-edit">
              <label className="inline-field">
                <input type="checkbox" checked={editing} onChange={(e) => setEditing(e.target.checked)} />
                <span>Approve with changed values</span>
              </label>
              {editing ? (
                <Suspense fallback={<Skeleton lines={3} label="Loading the form…" />}>
                  <ApprovalEditForm schema={shown.edit_schema as Record<string, unknown>} values={values} onChange={setValues} />
                </Suspense>
              ) : null}
            </div>
          ) : null}
          {shown.purpose === "recovery" ? (
            <label className="field">
              <span>Output, if you skip it (JSON: the state updates the step stands for)</span>
              <textarea className="mono" rows={3} value={skipOutput} onChange={(e) => setSkipOutput(e.target.value)} />
            </label>
          ) : null}
          <div className="inbox-buttons">
            {shown.purpose === "gate" ? (
              <>
                <Button variant="primary" disabled={busy} onClick={() => decide("approve")}>
                  {votesLeft > 1 ? `Approve (${shown.votes.length + 1} of ${shown.quorum})` : editing ? "Approve with changes" : "Approve"}
                </Button>
                <Button variant="danger-ghost" disabled={busy || (shown.reject_reasons.length > 0 && reason === "")}
                  title={shown.reject_reasons.length > 0 && reason === "" ? "Choose a reason first" : undefined} onClick={() => decide("reject")}>Reject</Button>
              </>
            ) : (
              <>
                <Button variant="primary" disabled={busy} onClick={() => decide("retry")}>Retry the step</Button>
                <Button disabled={busy} onClick={() => decide("skip")}>Skip with this output</Button>
                <Button variant="danger-ghost" disabled={busy} onClick={() => decide("fail")}>Fail the run</Button>
              </>
            )}
          </div>
        </form>
      ) : null}
      {pending && !shown.may_decide ? <p className="muted">You may read this request but not decide it.</p> : null}
    </article>
  );
}

/** The heading over the next actions: what approving does, did, or would have done. */
function nextHeading(a: Approval): string {
  if (a.purpose === "recovery") return a.status === "pending" ? "If retried, the run runs again" : "The step that was parked";
  if (a.status === "pending") return "If approved, the run does next";
  if (a.status === "approved") return "Approved: the run went on to";
  return "Had it been approved, the run would have done";
}

const DONE_WORDS: Record<string, string> = { approve: "approved", reject: "rejected", retry: "retried the step of", skip: "skipped the step of", fail: "failed the run of" };

/** An argument: text as it will be sent, an object as its own key/value list, anything else as JSON. */
function Value({ value }: { value: unknown }) {
  if (typeof value === "string") return <span className={value.startsWith("⚠") ? "inbox-warn" : undefined}>{value}</span>;
  if (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length > 0) {
    return (
      <dl className="inbox-args inbox-args-nested">
        {Object.entries(value as Record<string, unknown>).map(([k, v]) => (
          <div key={k}><dt>{k}</dt><dd><Value value={v} /></dd></div>
        ))}
      </dl>
    );
  }
  return <code>{JSON.stringify(value)}</code>;
}

function describeDeciders(a: Approval): string {
  const names = [...a.approvers, ...a.approver_groups.map((g) => `group ${g}`)];
  if (a.purpose === "recovery" && names.length === 0) return "approvers and the graph's operators";
  return names.length ? names.join(", ") : "anyone with the approver role";
}
