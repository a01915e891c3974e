// The builder's "Run draft": save, ask for input when the schema has fields, start the draft run; the drawer shows it.
import type { RunDetail } from "../../api/types";
import { Suspense, lazy, useCallback, useState, type ReactNode } from "react";
import type { GraphSpec } from "../spec";
import { draftNeedsInput, draftRunBlocked, startDraftRun } from "./draftRun";

// The input form (the run dialog's own chunk, shared with Run).
const StartRunDialog = lazy(() => import("./StartRunDialog"));

export interface DraftRun {
  /** The run shown in the drawer (null: none yet, or closed). */
  runId: number | null;
  close(): void;
  /** True from the press until the run exists or the input form opens. */
  starting: boolean;
  /** Why it cannot run now (null: it can). */
  blocked: string | null;
  start(): Promise<void>;
  /** The input form while it is open (null otherwise). */
  dialog: ReactNode;
}

/**
 * "Run draft" for graph ``graphId``: the server runs the SAVED draft, so ``flush`` (autosave)
 * goes first; a draft whose input schema has fields asks for them in the run dialog's form,
 * else it runs at once with the pinned test input or ``{}``. ``problems`` is the draft's
 * error count (null while it is checked); ``onMessage`` shows a failure as a toast.
 */
export function useDraftRun({ graphId, spec, flush, problems, onMessage }: {
  graphId: number; spec: GraphSpec; flush(): Promise<boolean>; problems: number | null; onMessage(text: string): void;
}): DraftRun {
  const [runId, setRunId] = useState<number | null>(null);
  const [starting, setStarting] = useState(false);
  const [asking, setAsking] = useState(false);
  const onStarted = useCallback((run: RunDetail) => setRunId(run.id), []);
  const testInput = (spec.test_input as Record<string, unknown> | undefined) ?? undefined;
  const start = async () => {
    if (starting) return;
    setStarting(true);
    try {
      if (!(await flush())) { onMessage("The draft could not be saved, so it was not run: see the save status."); return; }
      if (draftNeedsInput(spec)) { setAsking(true); return; }
      onStarted(await startDraftRun(graphId, testInput ?? {}));
    } catch (err) {
      onMessage(`Could not run the draft: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setStarting(false);
    }
  };
  const dialog = asking ? (
    <Suspense fallback={<div className="toast" role="status">Loading the run form…</div>}>
      <StartRunDialog graphId={graphId} spec={spec} onClose={() => setAsking(false)} initialInput={testInput}
        note={{ text: "Runs your draft as it is now, without publishing it: a test run, kept out of run lists and reports.", warn: false }}
        draftRun={{ start: (input) => startDraftRun(graphId, input), onStarted }} />
    </Suspense>
  ) : null;
  return { runId, close: () => setRunId(null), starting, blocked: draftRunBlocked(problems), start, dialog };
}
