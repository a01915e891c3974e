// A "Call graph" node's ``graph`` and ``version``: pickers of the published graphs and of the picked graph's versions.
import type { FieldProps } from "@rjsf/utils";
import type { EditorFormContext } from "./formContext";

function Frame({ id, title, help, children }: { id: string; title: string; help?: string; children: React.ReactNode }) {
  return (
    <div className="form-field">
      <label htmlFor={id}>{title}</label>
      {help && <p className="field-help">{help}</p>}
      {children}
    </div>
  );
}

/**
 * ``ui:field: "graphPick"``: a select of the published graphs (``formContext.callee.graphs``),
 * stored as the graph's id. A graph named in the spec but not offered (deleted, unpublished,
 * not readable) stays selected as "graph <id>", so nothing is changed silently; validation
 * says what is wrong with it.
 */
export function GraphPickField(props: FieldProps) {
  const { fieldPathId, formData, onChange, readonly, disabled, schema, name, registry } = props;
  const id = fieldPathId.$id;
  const callee = (registry.formContext as EditorFormContext | undefined)?.callee;
  const graphs = callee?.graphs ?? [];
  const value = typeof formData === "number" ? formData : null;
  const known = value === null || graphs.some((g) => g.id === value);
  return (
    <Frame id={id} title={String(schema.title ?? name)} help={graphs.length === 0 ? "No other graph is published yet: publish the graph to call first." : schema.description}>
      <select
        id={id}
        className="form-control"
        value={value === null ? "" : String(value)}
        disabled={Boolean(readonly || disabled)}
        onChange={(e) => onChange((e.target.value === "" ? undefined : Number(e.target.value)) as never, fieldPathId.path, undefined, id)}
      >
        <option value="">Pick a published graph…</option>
        {graphs.map((g) => (
          <option key={g.id} value={String(g.id)}>
            {g.name} (v{g.latest})
          </option>
        ))}
        {!known && <option value={String(value)}>graph {value}</option>}
      </select>
    </Frame>
  );
}

/**
 * ``ui:field: "graphVersion"``: "latest" (the newest published version when the step starts,
 * then pinned for that call) or one of the picked graph's version numbers.
 */
export function GraphVersionField(props: FieldProps) {
  const { fieldPathId, formData, onChange, readonly, disabled, schema, name, registry } = props;
  const id = fieldPathId.$id;
  const picked = (registry.formContext as EditorFormContext | undefined)?.callee?.picked ?? null;
  const value = formData === undefined || formData === null ? "latest" : String(formData);
  const numbers = picked ? Array.from({ length: picked.latest }, (_, i) => picked.latest - i) : [];
  if (value !== "latest" && !numbers.includes(Number(value))) numbers.push(Number(value));
  return (
    <Frame id={id} title={String(schema.title ?? name)} help={schema.description}>
      <select
        id={id}
        className="form-control"
        value={value}
        disabled={Boolean(readonly || disabled)}
        onChange={(e) => onChange((e.target.value === "latest" ? "latest" : Number(e.target.value)) as never, fieldPathId.path, undefined, id)}
      >
        <option value="latest">Latest published{picked ? ` (now v${picked.latest})` : ""}</option>
        {numbers.map((n) => (
          <option key={n} value={String(n)}>
            v{n}
          </option>
        ))}
      </select>
    </Frame>
  );
}
