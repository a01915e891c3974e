// /approvals/: the approvals inbox (assigned to me, my groups, decided by me) and the open item with its decision.
import type { Approval, InboxCounts, Page } from "../api/types";
import Form from "@rjsf/core";
import type { RJSFSchema } from "@rjsf/utils";
import { validator } from "../lib/formValidator";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, ApiError } from "../lib/api";
import { usePageContext } from "../lib/context";
import { shortcutsBlocked } from "../lib/shortcuts";
import { useInboxLive } from "../lib/inboxLive";
import { useConnection, useDebounced, useRunsChanged } from "../lib/useLiveEvents";
import { APPROVALS_CHANGED } from "../shell/TopBar";
import { formatDateTime, formatUsd } from "../shell/format";
import { EmptyState, ErrorMessage, LiveStatus, Loading, PageHeader, StatusBadge } from "../shell/ui";
import { changeNote, conflictMessage, costLine, deadlineState, isStale, LISTS, FALLBACK_POLL_MS, LIVE_DEBOUNCE_MS, listPath, type InboxList } from "./inbox";
import "./approvals.css";

interface Props {
  approvalId?: number;
}

/** The time now (ms), ticking every second while some item on screen counts down to a deadline. */
function useNow(active: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    const timer = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(timer);
  }, [active]);
  return now;
}

function DeadlineBadge({ item, now }: { item: Approval; now: number }) {
  const d = deadlineState(item, now);
  if (!d) return null;
  return <span className={`badge inbox-deadline inbox-deadline-${d.tone}`} title={d.detail}>{d.label}</span>;
}

export default function Approvals({ approvalId }: Props) {
  const [which, setWhich] = useState<InboxList>("assigned");
  const [q, setQ] = useState("");
  const [items, setItems] = useState<Approval[] | null>(null);
  const [counts, setCounts] = useState<InboxCounts | null>(null);
  const [listError, setListError] = useState<unknown>(null);
  const [selected, setSelected] = useState<number | null>(approvalId ?? null);
  const [checked, setChecked] = useState<Set<number>>(new Set());
  const [notice, setNotice] = useState<string | null>(null);
  const search = useRef<HTMLInputElement>(null);
  const seq = useRef(0);
  // Whether the list on screen was chosen (by the user, or once from the counts or the linked item).
  const tabChosen = useRef(false);
  const me = usePageContext().user?.username ?? "";

  const loadList = useCallback(() => {
    const id = ++seq.current;
    Promise.all([api<Page<Approval>>(listPath(which, q)), api<InboxCounts>(`approvals/inbox/counts/${q.trim() ? `?q=${encodeURIComponent(q.trim())}` : ""}`)])
      .then(([list, c]) => {
        if (id !== seq.current) return;
        setCounts(c);
        setListError(null);
        // Until the user picks a list, the inbox shows the first of "Assigned to me" and
        // "My groups" that has requests; while both are empty it stays on "Assigned to me"
        // and keeps watching, so a request that arrives later for a group opens that list.
        if (!tabChosen.current && approvalId === undefined && which === "assigned" && c.assigned === 0) {
          if (c.group > 0) {
            tabChosen.current = true;
            setWhich("group");
            return;
          }
        } else if (approvalId === undefined) {
          tabChosen.current = true;
        }
        setItems(list.results);
      })
      .catch((err: unknown) => {
        if (id === seq.current) setListError(err);
      });
  }, [which, q, approvalId]);
  useEffect(loadList, [loadList]);
  // Live: the inbox socket says when a request arrives, changes or leaves (and sends a
  // snapshot on every reconnect); the runs of the rows on screen say when one of them moved.
  const reload = useDebounced(loadList, LIVE_DEBOUNCE_MS);
  const connection = useInboxLive(() => {
    reload();
    window.dispatchEvent(new Event(APPROVALS_CHANGED));
  });
  useRunsChanged(items?.map((i) => ({ id: i.run, event_seq: i.run_event_seq })), reload);
  // No live socket (a server without WebSockets, or while reconnecting): fetch every
  // FALLBACK_POLL_MS instead, so new requests still show without a reload.
  useEffect(() => {
    if (connection === "open") return;
    const timer = window.setInterval(() => { if (document.visibilityState !== "hidden") loadList(); }, FALLBACK_POLL_MS);
    return () => window.clearInterval(timer);
  }, [connection, loadList]);
  const now = useNow((items ?? []).some((i) => i.due_at && i.status === "pending" && !i.escalated_at));

  // Opened from an email link: show the list the item is in.
  useEffect(() => {
    if (approvalId === undefined) return;
    api<Approval>(`approvals/${approvalId}/`).then((a) => {
      if (tabChosen.current) return;
      tabChosen.current = true;
      if (a.status !== "pending") setWhich("decided");
      else if (a.claimed_by !== me && !a.approvers.includes(me)) setWhich("group");
    }).catch(() => undefined);
  }, [approvalId, me]);

  useEffect(() => {
    if (selected === null && items && items.length > 0) setSelected(items[0]!.id);
  }, [items, selected]);

  const choose = (id: number) => {
    setSelected(id);
    window.history.replaceState(null, "", `/approvals/${id}/`);
  };

  const onListKey = (e: React.KeyboardEvent) => {
    if (!items || items.length === 0 || (e.key !== "ArrowDown" && e.key !== "ArrowUp")) return;
    e.preventDefault();
    const at = items.findIndex((i) => i.id === selected);
    const next = items[Math.max(0, Math.min(items.length - 1, at + (e.key === "ArrowDown" ? 1 : -1)))]!;
    choose(next.id);
    document.getElementById(`inbox-item-${next.id}`)?.focus();
  };

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "/" && !shortcutsBlocked(e)) {
        e.preventDefault();
        search.current?.focus();
      }
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, []);

  const claimable = (items ?? []).filter((i) => i.status === "pending" && i.may_decide && i.claimed_by === "");
  const bulkClaim = async () => {
    const ids = [...checked];
    try {
      const result = await api<{ claimed: number[]; refused: { id: number; message: string }[] }>("approvals/claim/", { method: "POST", body: { ids } });
      setNotice(
        `Claimed ${result.claimed.length} request${result.claimed.length === 1 ? "" : "s"}.` +
          (result.refused.length ? ` Not claimed: ${result.refused.map((r) => r.message).join("; ")}.` : ""),
      );
      setChecked(new Set());
      loadList();
    } catch (err) {
      setNotice(conflictMessage(err));
    }
  };

  return (
    <main className="page inbox-page">
      <PageHeader
        title="Approvals"
        subtitle="Requests waiting for a decision, across every run you may decide. Press / to search, ↑ ↓ to move through the list."
        actions={<LiveStatus connection={connection} pollSeconds={FALLBACK_POLL_MS / 1000} />}
      />
      <div className="inbox">
        <section className="inbox-lists card" aria-label="Inbox">
          <div role="tablist" aria-label="Lists" className="inbox-tabs">
            {LISTS.map((l) => (
              <button key={l.key} role="tab" type="button" aria-selected={which === l.key} className="inbox-tab"
                onClick={() => {
                  tabChosen.current = true;
                  // The list on screen: fetch it again, keeping its rows (clearing them would wait
                  // for a fetch that never comes, since ``which`` does not change).
                  if (l.key === which) { loadList(); return; }
                  setWhich(l.key); setItems(null); setSelected(null); setChecked(new Set());
                }}>
                {l.label} <span className="count" aria-label={`${counts?.[l.key] ?? 0} items`}>{counts ? counts[l.key] : "…"}</span>
              </button>
            ))}
          </div>
          <input ref={search} type="search" className="inbox-search" placeholder="Search prompt, graph, run id…" aria-label="Search approvals"
            value={q} onChange={(e) => { setQ(e.target.value); setSelected(null); }} />
          {which === "group" && claimable.length > 0 ? (
            <div className="inbox-bulk">
              <label className="inline-field">
                <input type="checkbox" aria-label="Select all unclaimed"
                  checked={claimable.every((i) => checked.has(i.id))}
                  onChange={(e) => setChecked(e.target.checked ? new Set(claimable.map((i) => i.id)) : new Set())} />
                <span className="muted">{checked.size ? `${checked.size} selected` : "Select"}</span>
              </label>
              <button type="button" className="btn btn-small" disabled={checked.size === 0} onClick={bulkClaim}>Claim selected</button>
            </div>
          ) : null}
          {notice ? <div className="alert inbox-notice" role="status">{notice}</div> : null}
          {listError ? <ErrorMessage error={listError} title="The inbox could not be loaded." onRetry={loadList} /> : null}
          {items === null && !listError ? <Loading label="Loading requests…" /> : null}
          {items && items.length === 0 ? (
            <EmptyState title={q ? `Nothing matches “${q}”` : LISTS.find((l) => l.key === which)!.empty}>
              {q ? "Try other words, or clear the search." : LISTS.find((l) => l.key === which)!.help}
            </EmptyState>
          ) : null}
          {items && items.length > 0 ? (
            <ul className="inbox-items" aria-label={LISTS.find((l) => l.key === which)!.label} onKeyDown={onListKey}>
              {items.map((item) => (
                <li key={item.id} className={`inbox-item${item.id === selected ? " is-selected" : ""}`}>
                  {which === "group" && item.claimed_by === "" && item.may_decide ? (
                    <input type="checkbox" aria-label={`Select request ${item.id}`} checked={checked.has(item.id)}
                      onChange={(e) => setChecked((s) => { const n = new Set(s); if (e.target.checked) n.add(item.id); else n.delete(item.id); return n; })} />
                  ) : <span className="inbox-check-gap" />}
                  <button id={`inbox-item-${item.id}`} type="button" className="inbox-item-button" aria-current={item.id === selected ? "true" : undefined}
                    onClick={() => choose(item.id)}>
                    <span className="inbox-item-top">
                      <span className="inbox-item-graph">{item.graph_name}</span>
                      <span className="inbox-item-badges">
                        <DeadlineBadge item={item} now={now} />
                        {item.purpose === "recovery" ? <StatusBadge status="parked" /> : <StatusBadge status={item.status} />}
                      </span>
                    </span>
                    <span className="inbox-item-prompt">{item.prompt}</span>
                    <span className="inbox-item-meta muted">
                      run {item.run} · {item.node_id} · {formatDateTime(item.created_at)}
                      {item.claimed_by ? ` · claimed by ${item.claimed_by}` : ""}
                      {item.quorum > 1 ? ` · ${item.votes.length} of ${item.quorum} approvals` : ""}
                    </span>
                  </button>
                </li>
              ))}
            </ul>
          ) : null}
        </section>
        <section className="inbox-detail" aria-label="Request">
          {selected === null ? (
            items && items.length === 0 ? null : <div className="card muted">Choose a request to see what approving it does.</div>
          ) : (
            <ApprovalDetail key={selected} approvalId={selected} onChanged={loadList} />
          )}
        </section>
      </div>
    </main>
  );
}

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
  if (!shown) return <div className="card"><Loading label="Loading the request…" /></div>;

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
            <a href={`/runs/${shown.run}/`}>Run {shown.run}</a> at <code>{shown.node_id}</code> · asked {formatDateTime(shown.created_at)}
            {shown.started_by ? ` · started by ${shown.started_by}` : ""}
          </div>
        </div>
        <StatusBadge status={shown.status} />
      </div>

      {note ? (
        <div className="alert alert-warning" role="alert">
          <span>Changed since you opened it: {note}</span>
          <div><button type="button" className="btn btn-small" onClick={showLatest}>Show the latest</button></div>
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
          {isStale(error) ? <div><button type="button" className="btn btn-small" onClick={showLatest}>Show the latest</button></div> : null}
        </div>
      ) : null}

      {canAct ? (
        <div className="inbox-claim">
          {shown.claimed_by === "" ? (
            <button type="button" className="btn btn-small" disabled={busy} onClick={() => act("claim/", undefined, "Claimed: only you can decide it until you hand it back.")}>Claim</button>
          ) : shown.claimed_by === me ? (
            <button type="button" className="btn btn-small" disabled={busy} onClick={() => act("hand-back/", undefined, "Handed back to the group.")}>Hand back</button>
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
                <Form schema={shown.edit_schema as RJSFSchema} formData={values} validator={validator}
                  onChange={(e) => setValues((e.formData ?? {}) as Record<string, unknown>)} uiSchema={{ "ui:submitButtonOptions": { norender: true } }}
                  showErrorList={false} noHtml5Validate>
                  <></>
                </Form>
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
                <button type="button" className="btn btn-primary" disabled={busy} onClick={() => decide("approve")}>
                  {votesLeft > 1 ? `Approve (${shown.votes.length + 1} of ${shown.quorum})` : editing ? "Approve with changes" : "Approve"}
                </button>
                <button type="button" className="btn btn-danger-ghost" disabled={busy || (shown.reject_reasons.length > 0 && reason === "")}
                  title={shown.reject_reasons.length > 0 && reason === "" ? "Choose a reason first" : undefined} onClick={() => decide("reject")}>Reject</button>
              </>
            ) : (
              <>
                <button type="button" className="btn btn-primary" disabled={busy} onClick={() => decide("retry")}>Retry the step</button>
                <button type="button" className="btn" disabled={busy} onClick={() => decide("skip")}>Skip with this output</button>
                <button type="button" className="btn btn-danger-ghost" disabled={busy} onClick={() => decide("fail")}>Fail the run</button>
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
