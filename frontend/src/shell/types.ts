// Shapes of the API answers the pages read (builder/serializers.py, runs/api/serializers.py).

export interface GraphSummary {
  id: number;
  name: string;
  description: string;
  latest_version: number | null;
  created_by: string | null;
  created_at: string;
  updated_at: string;
  /** Runs pinned to its versions (node test runs included). */
  run_count?: number;
  /** False when runs exist: a graph with runs cannot be deleted. */
  deletable?: boolean;
}

export interface RunSummary {
  id: number;
  graph: number;
  graph_name: string;
  version: number;
  status: string;
  /** "decision" (parked after a crash), "approval" (at a gate) or null. */
  waiting_for?: string | null;
  /** A running step's worker stopped heartbeating (worked out when read). */
  interrupted?: boolean;
  /** The seq of the run's last committed event: follow the live stream from here. */
  event_seq?: number;
  error: unknown;
  step_count: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: string;
  /** A one-node test run from the builder (pinned to a hidden test snapshot numbered 0, not a published version). */
  is_test?: boolean;
  /** The run this one was forked from, and the step of it. */
  forked_from?: number | null;
  forked_from_step?: number | null;
  created_by: string | null;
  /** "command line" for a run `manage.py run_graph` started (no user), else null. */
  started_from?: string | null;
  /** What started the run when not a user directly ("webhook orders"), else "". */
  source?: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface StepSummary {
  id: number;
  parent: number | null;
  node_id: string;
  kind: string;
  iteration: number;
  status: string;
  attempt: number;
  max_attempts: number;
  /** Whether the running step's worker is alive; null when not running. */
  worker_alive?: boolean | null;
  /** When the running step's lease runs out unless its worker heartbeats (ISO 8601); null when not running. */
  lease_expires_at?: string | null;
  output: unknown;
  error: unknown;
  cost_usd: string | null;
  started_at: string | null;
  finished_at: string | null;
}

/** Where a forked run came from: its source run, the step it was forked at and that step's node, and the nodes whose results it kept. */
export interface ForkOrigin {
  run: number;
  step: number;
  node_id: string;
  kept_nodes: string[];
}

export interface RunDetail extends RunSummary {
  input: unknown;
  state: unknown;
  output: unknown;
  steps: StepSummary[];
  /** A node-test run: the node it tested; null otherwise. */
  tested_node?: string | null;
  /** A forked run: where it came from; null otherwise. */
  fork_origin?: ForkOrigin | null;
}

/** One node the run goes on to if an approval is approved, its arguments rendered from the current state. */
export interface NextAction {
  node_id: string;
  kind: string;
  label: string;
  arguments: Record<string, unknown>;
}

/** An approval request as the inbox API returns it (approvals/serializers.py ``ApprovalOutput``). */
export interface Approval {
  id: number;
  run: number;
  step: number;
  graph: number;
  graph_name: string;
  node_id: string;
  /** "gate" (an approval node) or "recovery" (a parked step: retry, skip or fail). */
  purpose: string;
  status: string;
  prompt: string;
  payload: Record<string, unknown>;
  approvers: string[];
  approver_groups: string[];
  decision: string;
  comment: string;
  decided_by: string;
  created_at: string;
  decided_at: string | null;
  may_decide: boolean;
  /** Sent back with a decision; it changes with every claim, vote, reassignment and with the next action. */
  version: string;
  last_change: string;
  claimed_by: string;
  claimed_at: string | null;
  quorum: number;
  votes: { by: string; decision: string; comment: string; at: string }[];
  reason: string;
  values: Record<string, unknown> | null;
  run_status: string;
  started_by: string;
  cost_usd: string;
  budget_usd: string | null;
  next_actions: NextAction[];
  state: Record<string, unknown>;
  reject_reasons: string[];
  edit_schema: Record<string, unknown> | null;
  starter_counts: boolean;
  /** The node's deadline as written ("4h"), when it has one; ``due_at`` is when it falls due. */
  deadline: string | null;
  due_at: string | null;
  /** What happens at the deadline: "notify", "reassign" or "timeout" ("" without one). */
  escalation: string;
  escalated_at: string | null;
  /** The run's last event seq: follow the run's live events from it. */
  run_event_seq: number;
}

export interface InboxCounts {
  assigned: number;
  group: number;
  decided: number;
  waiting: number;
}
