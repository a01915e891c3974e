// Graph settings that belong to the graph, not its draft: who may run it, how many of its runs may be active and how long its finished runs are kept, loaded once (GET /graphs/<id>/) and each saved at once (PATCH).
import { useContext, useEffect, useMemo, useState } from "react";
import { ApiError, api } from "../../lib/api";
import { PageContextReact } from "../../lib/context";
import { GraphFlowControl, type FlowControl } from "./GraphFlowControl";
import { GraphOperators, type Operators } from "./GraphOperators";

interface GraphRecordBody extends Operators, Partial<FlowControl> {
  retention_days?: number | null;
}

/** The graph's own settings (no undo step, no new version: they apply to the graph at once). */
export function GraphRecord({ readOnly }: { readOnly: boolean }) {
  const page = useContext(PageContextReact);
  const graphId = typeof page?.props.graphId === "number" ? page.props.graphId : null;
  const [graph, setGraph] = useState<GraphRecordBody | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  useEffect(() => {
    if (graphId === null) return;
    let live = true;
    api<GraphRecordBody>(`graphs/${graphId}/`).then(
      (g) =>
        live &&
        setGraph({
          operators: g.operators ?? [],
          operator_groups: g.operator_groups ?? [],
          retention_days: g.retention_days ?? null,
          max_concurrent_runs: g.max_concurrent_runs ?? null,
          concurrency_key: g.concurrency_key ?? "",
          concurrency_key_limit: g.concurrency_key_limit ?? 1,
        }),
      (err: unknown) => live && setLoadError(err instanceof Error ? err.message : String(err)),
    );
    return () => {
      live = false;
    };
  }, [graphId]);
  // One object per load: GraphOperators resets to it when it changes, not on every render.
  const operators = useMemo(() => graph && { operators: graph.operators, operator_groups: graph.operator_groups }, [graph]);
  const flow = useMemo(
    () =>
      graph && {
        max_concurrent_runs: graph.max_concurrent_runs ?? null,
        concurrency_key: graph.concurrency_key ?? "",
        concurrency_key_limit: graph.concurrency_key_limit ?? 1,
      },
    [graph],
  );
  if (graphId === null) return null;
  return (
    <>
      <GraphOperators readOnly={readOnly} graphId={graphId} initial={operators} loadError={loadError} />
      <GraphFlowControl readOnly={readOnly} graphId={graphId} initial={flow} />
      <GraphRetention readOnly={readOnly} graphId={graphId} loaded={graph !== null} initial={graph?.retention_days ?? null} />
    </>
  );
}

/** The most days the server takes (graphs.models.MAX_RETENTION_DAYS). */
export const MAX_RETENTION_DAYS = 36500;

interface RetentionProps {
  readOnly: boolean;
  graphId: number;
  loaded: boolean;
  initial: number | null;
}

/**
 * "Keep finished runs for N days": empty is the server's default. Saved when the field is left
 * (or on Enter) if it changed; a value the server refuses shows its message under the field
 * and stays as typed, so it can be fixed.
 */
export function GraphRetention({ readOnly, graphId, loaded, initial }: RetentionProps) {
  const [saved, setSaved] = useState<number | null>(initial);
  const [text, setText] = useState(initial === null ? "" : String(initial));
  const [state, setState] = useState<"idle" | "saving" | "saved">("idle");
  const [errors, setErrors] = useState<string[]>([]);
  useEffect(() => {
    setSaved(initial);
    setText(initial === null ? "" : String(initial));
  }, [initial]);
  const id = "graph.retention_days";
  const save = () => {
    const trimmed = text.trim();
    const value = trimmed === "" ? null : Number(trimmed);
    if (value === saved && trimmed === (saved === null ? "" : String(saved))) return;
    setState("saving");
    setErrors([]);
    // A value that is not a number goes to the server as typed: its refusal names the field.
    const body = { retention_days: value === null || Number.isFinite(value) ? value : trimmed };
    api<GraphRecordBody>(`graphs/${graphId}/`, { method: "PATCH", body }).then(
      (g) => {
        const kept = g.retention_days ?? null;
        setSaved(kept);
        setText(kept === null ? "" : String(kept));
        setState("saved");
      },
      (err: unknown) => {
        setState("idle");
        const field = err instanceof ApiError ? err.fields.retention_days : undefined;
        setErrors(field && field.length > 0 ? field : [err instanceof Error ? err.message : String(err)]);
      },
    );
  };
  const describe = saved === null ? "the server's default" : `${saved} day${saved === 1 ? "" : "s"}`;
  return (
    <section className="panel-section" aria-label="Retention">
      <h3>Retention</h3>
      <div className="form-field">
        <label htmlFor={id}>Keep finished runs (days)</label>
        {!loaded ? (
          <p className="field-help">Loading…</p>
        ) : readOnly ? (
          <p className="readonly-value" id={id} tabIndex={-1}>
            {saved === null ? "Server default" : describe}
          </p>
        ) : (
          <input
            id={id}
            type="number"
            inputMode="numeric"
            min={1}
            max={MAX_RETENTION_DAYS}
            step={1}
            placeholder="server default"
            value={text}
            aria-describedby={`${id}-help`}
            aria-invalid={errors.length > 0 ? true : undefined}
            onChange={(e) => {
              setText(e.target.value);
              setState("idle");
            }}
            onBlur={save}
            onKeyDown={(e) => {
              if (e.key === "Enter") save();
            }}
          />
        )}
        <p className="field-help" id={`${id}-help`}>
          A finished run is deleted this many days after it ended, with its steps and events; its spend stays in the cost
          reports. Empty: the server&apos;s default. Applies to runs already finished too.
          {state === "saving" ? " Saving…" : state === "saved" ? ` Saved: ${describe}.` : ""}
        </p>
        {errors.length > 0 && (
          <ul className="field-errors" role="alert">
            {errors.map((m, i) => (
              <li key={i}>{m}</li>
            ))}
          </ul>
        )}
      </div>
    </section>
  );
}
