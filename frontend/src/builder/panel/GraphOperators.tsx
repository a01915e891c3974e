// Graph settings' "Who may run it": the graph's named operators (users and groups) with the type-ahead picker, saved at once (PATCH /graphs/<id>/).
import { useEffect, useState } from "react";
import { api } from "../../lib/api";
import { PrincipalPicker } from "../../shell/PrincipalPicker";

export interface Operators {
  operators: string[];
  operator_groups: string[];
}

interface Props {
  readOnly: boolean;
  graphId: number;
  /** The graph's operators as loaded (null while loading, or when the load failed). */
  initial: Operators | null;
  loadError: string | null;
}

/**
 * The operators are the graph's, not the draft's: a change is saved to the graph on its own
 * (not an undo step, not a new version) and applies to new and running runs alike.
 */
export function GraphOperators({ readOnly, graphId, initial, loadError }: Props) {
  const [value, setValue] = useState<Operators | null>(initial);
  const [state, setState] = useState<"idle" | "saving" | "saved">("idle");
  const [error, setError] = useState<string | null>(null);
  useEffect(() => setValue(initial), [initial]);
  const save = (operators: string[], operator_groups: string[]) => {
    const before = value;
    setValue({ operators, operator_groups });
    setState("saving");
    setError(null);
    api<Operators>(`graphs/${graphId}/`, { method: "PATCH", body: { operators, operator_groups } }).then(
      () => setState("saved"),
      (err: unknown) => {
        setValue(before);
        setState("idle");
        setError(err instanceof Error ? err.message : String(err));
      },
    );
  };
  const shown = error ?? loadError;
  return (
    <section className="panel-section" aria-label="Who may run it">
      <h3>Who may run it</h3>
      <div className="form-field">
        <label htmlFor="graph.operators">Operators</label>
        {value === null && !shown ? <p className="field-help">Loading…</p> : null}
        {value !== null ? (
          <PrincipalPicker id="graph.operators" label="Operators" users={value.operators} groups={value.operator_groups}
            onChange={save} readOnly={readOnly} />
        ) : null}
        <p className="field-help">
          Users and groups who may start its runs and cancel, resume, retry or fork them. None named: the operators group.
          {state === "saving" ? " Saving…" : state === "saved" ? " Saved." : ""}
        </p>
        {shown ? <p className="field-errors" role="alert">{shown}</p> : null}
      </div>
    </section>
  );
}
