// Shapes of the API answers the pages read (builder/serializers.py, runs/serializers.py).

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
  created_by: string | null;
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
  output: unknown;
  error: unknown;
  cost_usd: string | null;
  started_at: string | null;
  finished_at: string | null;
}

export interface RunDetail extends RunSummary {
  input: unknown;
  state: unknown;
  output: unknown;
  steps: StepSummary[];
  /** "command line" for a run `manage.py run_graph` started (no user), else null. */
  started_from?: string | null;
}
