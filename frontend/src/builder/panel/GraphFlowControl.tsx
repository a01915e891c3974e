// A graph's flow control (runs.engine.store.flow): at most N active runs, and at most M per value of a concurrency key read from the run input; each field saved when left (PATCH /graphs/<id>/), a refusal shown under it.
import { useEffect, useState } from "react";
import { ApiError, api } from "../../lib/api";

export interface FlowControl {
  max_concurrent_runs: number | null;
  concurrency_key: string;
  concurrency_key_limit: number;
}

type Name = keyof FlowControl;

interface FieldProps {
  graphId: number;
  name: Name;
  label: string;
  help: string;
  numeric: boolean;
  placeholder: string;
  readOnly: boolean;
  initial: number | string | null;
}

/** One setting, saved on its own when the field is left (or on Enter) if it changed. */
function FlowField({ graphId, name, label, help, numeric, placeholder, readOnly, initial }: FieldProps) {
  const show = (v: number | string | null) => (v === null ? "" : String(v));
  const [saved, setSaved] = useState(initial);
  const [text, setText] = useState(show(initial));
  const [state, setState] = useState<"idle" | "saving" | "saved">("idle");
  const [errors, setErrors] = useState<string[]>([]);
  useEffect(() => {
    setSaved(initial);
    setText(show(initial));
  }, [initial]);
  const id = `graph.${name}`;
  const save = () => {
    const trimmed = text.trim();
    if (trimmed === show(saved)) return;
    // Empty: unlimited (the limit) or no key; a value that is not a number goes as typed, so the refusal names the field.
    const value = !numeric ? trimmed : trimmed === "" ? null : Number.isFinite(Number(trimmed)) ? Number(trimmed) : trimmed;
    setState("saving");
    setErrors([]);
    api<FlowControl>(`graphs/${graphId}/`, { method: "PATCH", body: { [name]: value } }).then(
      (g) => {
        setSaved(g[name]);
        setText(show(g[name]));
        setState("saved");
      },
      (err: unknown) => {
        setState("idle");
        const field = err instanceof ApiError ? err.fields[name] : undefined;
        setErrors(field && field.length > 0 ? field : [err instanceof Error ? err.message : String(err)]);
      },
    );
  };
  return (
    <div className="form-field">
      <label htmlFor={id}>{label}</label>
      {readOnly ? (
        <p className="readonly-value" id={id} tabIndex={-1}>{text === "" ? placeholder : text}</p>
      ) : (
        <input
          id={id}
          type={numeric ? "number" : "text"}
          inputMode={numeric ? "numeric" : undefined}
          min={numeric ? 1 : undefined}
          step={numeric ? 1 : undefined}
          placeholder={placeholder}
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
        {help}
        {state === "saving" ? " Saving…" : state === "saved" ? " Saved." : ""}
      </p>
      {errors.length > 0 && (
        <ul className="field-errors" role="alert">
          {errors.map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** The "Concurrency" section of the graph settings (nothing selected in the builder). */
export function GraphFlowControl({ readOnly, graphId, initial }: { readOnly: boolean; graphId: number; initial: FlowControl | null }) {
  return (
    <section className="panel-section" aria-label="Concurrency">
      <h3>Concurrency</h3>
      {initial === null ? (
        <p className="field-help">Loading…</p>
      ) : (
        <>
          <FlowField graphId={graphId} name="max_concurrent_runs" label="Max concurrent runs" numeric readOnly={readOnly}
            placeholder="unlimited" initial={initial.max_concurrent_runs}
            help="Runs active at once (queued, running or waiting at a gate); the rest wait in line, first started first. Empty: unlimited." />
          <FlowField graphId={graphId} name="concurrency_key" label="Concurrency key" numeric={false} readOnly={readOnly}
            placeholder="none" initial={initial.concurrency_key}
            help="A path into the run input, such as customer_id: runs with the same value share the limit below. Empty: none." />
          <FlowField graphId={graphId} name="concurrency_key_limit" label="Runs per key" numeric readOnly={readOnly}
            placeholder="1" initial={initial.concurrency_key_limit}
            help="Active runs at most per value of the concurrency key." />
        </>
      )}
    </section>
  );
}
