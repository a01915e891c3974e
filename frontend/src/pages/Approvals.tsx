// /approvals/: the approvals inbox (assigned to me, my groups, decided by me) and the open item with its decision.
import type { Approval, ClaimMany, InboxCounts, Page } from "../api/types";
import { useCallback, useEffect, useRef, useState } from "react";
import { api } from "../lib/api";
import { usePageContext } from "../lib/context";
import { shortcutsBlocked } from "../lib/shortcuts";
import { useInboxLive } from "../lib/inboxLive";
import { useDebounced, useRunsChanged } from "../lib/useLiveEvents";
import { APPROVALS_CHANGED } from "../shell/TopBar";
import { formatDateTime } from "../shell/format";
import { EmptyState, ErrorMessage, LiveStatus, PageHeader, Skeleton, StatusBadge } from "../shell/ui";
import { conflictMessage, LISTS, FALLBACK_POLL_MS, LIVE_DEBOUNCE_MS, listPath, type InboxList } from "./inbox";
import { useNow, DeadlineBadge } from "./DeadlineBadge";
import { ApprovalDetail } from "./ApprovalDetail";
import "./approvals.css";
import { Button } from "../shell/Button";

interface Props {
  approvalId?: number;
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
  // Below 900 px the inbox shows one thing at a time: the request (what an approval email's
  // link opens, its decision within reach) or the list ("All requests" goes back to it).
  const [phoneView, setPhoneView] = useState<"list" | "request">(approvalId !== undefined ? "request" : "list");
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
    setPhoneView("request");
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

  const backToList = () => {
    setPhoneView("list");
    // Back where the user was: the request they had open, as the list's current item.
    window.requestAnimationFrame(() => document.getElementById(`inbox-item-${selected}`)?.focus());
  };

  const claimable = (items ?? []).filter((i) => i.status === "pending" && i.may_decide && i.claimed_by === "");
  const bulkClaim = async () => {
    const ids = [...checked];
    try {
      const result = await api<ClaimMany>("approvals/claim/", { method: "POST", body: { ids } });
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
    <main className="page inbox-page" data-view={phoneView}>
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
              <Button size="small" disabled={checked.size === 0} onClick={bulkClaim}>Claim selected</Button>
            </div>
          ) : null}
          {notice ? <div className="alert inbox-notice" role="status">{notice}</div> : null}
          {listError ? <ErrorMessage error={listError} title="The inbox could not be loaded." onRetry={loadList} /> : null}
          {items === null && !listError ? <Skeleton lines={4} variant="table" label="Loading requests…" /> : null}
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
          <div className="inbox-back">
            <Button variant="ghost" size="small" onClick={backToList}>
              ← All requests{counts ? ` (${counts[which]})` : ""}
            </Button>
          </div>
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
