// Graph settings' "Who may run it": the graph's named operators (users and groups) with the type-ahead picker, saved at once (PATCH /graphs/<id>/).
import { useContext, useEffect, useState } from "react";
import { api } from "../../lib/api";
import { PageContextReact } from "../../lib/context";
import { PrincipalPicker } from "../../shell/PrincipalPicker";

interface Operators {
  operators: string[];
  operator_groups: string[];
}

/**
 * The operators are the graph's, not the draft's: a change is saved to the graph on its own
 * (not an undo step, not a new version) and applies to new and running runs alike.
 */
export function GraphOperators({ readOnly }: { readOnly: boolean }) {
  const page = useContext(PageContextReact);
  const graphId = typeof page?.props.graphId === "number" ? page.props.graphId : null;
  const [value, setValue] = useState<Operators | null>(null);
  const [state, setState] = useState<"idle" | "saving" | "saved">("idle");
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (graphId === null) return;
    let live = true;
    api<Operators>(`graphs/${graphId}/`).then(
      (g) => live && setValue({ operators: g.operators ?? [], operator_groups: g.operator_groups ?? [] }),
      (err: unknown) => live && setError(err instanceof Error ? err.message : String(err)),
    );
    return () => { live = false; };
  }, [graphId]);
  if (graphId === null) return null;
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
  return (
    <section className="panel-section" aria-label="Who may run it">
      <h3>Who may run it</h3>
      <div className="form-field">
        <label htmlFor="graph.operators">Operators</label>
        {value === null && !error ? <p className="field-help">Loading…</p> : null}
        {value !== null ? (
          <PrincipalPicker id="graph.operators" label="Operators" users={value.operators} groups={value.operator_groups}
            onChange={save} readOnly={readOnly} />
        ) : null}
        <p className="field-help">
          Users and groups who may start its runs and cancel, resume, retry or fork them. None named: the operators group.
          {state === "saving" ? " Saving…" : state === "saved" ? " Saved." : ""}
        </p>
        {error ? <p className="field-errors" role="alert">{error}</p> : null}
      </div>
    </section>
  );
}
