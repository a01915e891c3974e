// The inbox's pure parts: list names, what a 409 means to the person who clicked, how an item differs from what is shown.
import { ApiError } from "../lib/api";
import type { Approval } from "../api/types";

export type InboxList = "assigned" | "group" | "decided";

export const LISTS: { key: InboxList; label: string; empty: string; help: string }[] = [
  { key: "assigned", label: "Assigned to me", empty: "Nothing is assigned to you", help: "Requests that name you, and the ones you claimed, appear here." },
  { key: "group", label: "My groups", empty: "Nothing waits for your groups", help: "Requests for a group you are in (or for every approver) appear here; claim one to make it yours." },
  { key: "decided", label: "Decided by me", empty: "You have decided nothing yet", help: "Requests you approved, rejected or voted on are kept here." },
];

/** How long (ms) a burst of live changes is gathered before the list is fetched again. */
export const LIVE_DEBOUNCE_MS = 150;

/** How often (ms) the list is fetched while no live socket is open (a server without WebSockets). */
export const FALLBACK_POLL_MS = 3000;

/** "1d 4h", "3h 05m", "4m 09s", "12s": a duration in seconds, two units at most. */
export function formatCountdown(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m ${String(r).padStart(2, "0")}s`;
  return `${r}s`;
}

const ESCALATION_WORDS: Record<string, string> = {
  timeout: "then it times out and the run takes its timeout path",
  reassign: "then it is reassigned",
  notify: "then the approvers are reminded by email",
};

/**
 * How an item's deadline stands at ``now`` (ms since the epoch), or null without one:
 * ``tone`` "due" (counting down), "soon" (under 10 % of it or 5 min left), "overdue"
 * (passed, not yet fired: the engine fires it within a moment), "escalated" (fired) or
 * "expired" (timed out); ``label`` is the short text of a list row, ``detail`` the sentence
 * of the open item.
 */
export function deadlineState(a: Pick<Approval, "due_at" | "escalation" | "escalated_at" | "status" | "deadline" | "created_at">, now: number): { tone: "due" | "soon" | "overdue" | "escalated" | "expired"; label: string; detail: string } | null {
  if (!a.due_at) return null;
  const due = Date.parse(a.due_at);
  const then = ESCALATION_WORDS[a.escalation] ?? "";
  if (a.status === "expired") return { tone: "expired", label: "timed out", detail: `Timed out: nobody decided within ${a.deadline ?? "its deadline"}, so the run took its timeout path.` };
  if (a.escalated_at) {
    const what = a.escalation === "reassign" ? "reassigned" : "approvers reminded";
    return { tone: "escalated", label: `escalated · ${what}`, detail: `Overdue since ${new Date(due).toLocaleString()}: ${what} when its ${a.deadline ?? ""} deadline passed.` };
  }
  const left = (due - now) / 1000;
  if (left <= 0) return { tone: "overdue", label: "overdue", detail: `The ${a.deadline ?? ""} deadline has passed; ${then.replace("then ", "")} in a moment.` };
  const whole = (due - Date.parse(a.created_at)) / 1000;
  const soon = left < Math.min(300, Math.max(whole * 0.1, 0)) || left < 60;
  return { tone: soon ? "soon" : "due", label: `due in ${formatCountdown(left)}`, detail: `Decide within ${formatCountdown(left)} (deadline ${a.deadline ?? ""}); ${then}.` };
}

/**
 * The sentence a refused decision or claim shows: who decided or holds it, or what changed.
 * ``error`` is what ``api()`` threw; anything that is not a 409 gets its own message.
 */
export function conflictMessage(error: unknown): string {
  if (!(error instanceof ApiError)) return error instanceof Error ? error.message : String(error);
  if (error.status !== 409) return error.message;
  const body = (error.body?.error ?? {}) as Record<string, unknown>;
  const who = (body.decided_by as string | null | undefined) ?? (body.by as string | null | undefined);
  switch (error.code) {
    case "already_decided":
      return `Not recorded: ${who ?? "someone"} already ${String(body.status ?? "decided")} this request.`;
    case "claimed":
      return `Not recorded: ${who ?? "someone else"} claimed this request; only they can decide it unless they hand it back.`;
    case "changed":
    case "action_changed":
      return `Not recorded: ${error.message}`;
    case "already_voted":
      return "You already approved this request; it needs other approvers.";
    default:
      return error.message;
  }
}

/** Whether a refusal means the item on screen is stale (so the page offers to show the latest). */
export function isStale(error: unknown): boolean {
  return error instanceof ApiError && error.status === 409 && ["changed", "action_changed", "claimed", "already_decided"].includes(error.code);
}

/**
 * What changed between the item as shown and as the server has it now: null when nothing a
 * decider relies on did (``version`` covers claims, votes, reassignments, decisions and the next action).
 */
export function changeNote(shown: Approval, latest: Approval): string | null {
  if (shown.version === latest.version && shown.status === latest.status) return null;
  if (latest.status === "expired") return `nobody decided within ${latest.deadline ?? "its deadline"}: it timed out and the run took its timeout path.`;
  if (latest.status !== "pending") return `${latest.decided_by || "someone"} ${latest.status === "cancelled" ? "closed" : latest.status} it.`;
  return latest.last_change && latest.last_change !== shown.last_change ? `${latest.last_change}.` : "what approving would do has changed (the run's state moved on).";
}

/** "$0.0123 of $5.00" / "$0.0123 (no budget)"; money as the API gives it (decimal strings). */
export function costLine(cost: string, budget: string | null, format: (v: string) => string): string {
  return budget === null ? `${format(cost)} so far (no budget)` : `${format(cost)} of ${format(budget)} budget`;
}

/** The API path of one inbox list, searched for ``q``. */
export function listPath(which: InboxList, q: string, pageSize = 50): string {
  const query = new URLSearchParams({ list: which, page_size: String(pageSize) });
  if (q.trim()) query.set("q", q.trim());
  return `approvals/inbox/?${query.toString()}`;
}
