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
