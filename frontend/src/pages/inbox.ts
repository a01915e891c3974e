// The inbox's pure parts: list names, what a 409 means to the person who clicked, how an item differs from what is shown.
import { ApiError } from "../lib/api";
import type { Approval } from "../shell/types";

export type InboxList = "assigned" | "group" | "decided";

export const LISTS: { key: InboxList; label: string; empty: string; help: string }[] = [
  { key: "assigned", label: "Assigned to me", empty: "Nothing is assigned to you", help: "Requests that name you, and the ones you claimed, appear here." },
  { key: "group", label: "My groups", empty: "Nothing waits for your groups", help: "Requests for a group you are in (or for every approver) appear here; claim one to make it yours." },
  { key: "decided", label: "Decided by me", empty: "You have decided nothing yet", help: "Requests you approved, rejected or voted on are kept here." },
];

/** How often (ms) the lists and the open item are fetched again, so new requests and others' decisions show without a reload. */
export const POLL_MS = 3000;

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
