// The run input's schema edited as a list of fields, with "Edit as JSON" for what the list cannot show.
import { useState } from "react";
import { LocalInput, LocalNumberInput, LocalTextarea } from "../editors/LocalText";
import { JsonValueEditor } from "../editors/JsonValueEditor";
import { usePendingEdit } from "../pendingEdits";
import { FIELD_TYPES, freshFieldName, keptSummary, readInputSchema, withType, writeInputSchema, type FieldType, type InputField } from "./inputSchema";
import { Button } from "../../shell/Button";

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** An edit of the input schema: from the schema as it is now to the next one. */
export type SchemaEdit = (current: Record<string, unknown>) => Record<string, unknown>;

interface Props {
  /** The schema to show (the side panel's copy, which can lag the builder's state). */
  schema: Record<string, unknown>;
  /**
   * An edit as an undo step; ``key`` coalesces typing in one input. Edits are functions of
   * the builder's current schema, never of ``schema``: the panel renders a deferred copy, so
   * a field list captured at render time can miss an edit made a moment before (a rename
   * committed on blur, then Required ticked by the same click), and writing it back would
   * undo that edit in the draft while the panel still showed it.
   */
  onChange(edit: SchemaEdit, key: string): void;
}

function NameInput({ id, field, fields, onRename }: { id: string; field: InputField; fields: readonly InputField[]; onRename(name: string): void }) {
  const [text, setText] = useState(field.name);
  const [shown, setShown] = useState(field.name);
  const [error, setError] = useState<string | null>(null);
  // An outside change (undo) replaces the text.
  if (shown !== field.name) {
    setShown(field.name);
    setText(field.name);
  }
  usePendingEdit(`${id}.name`, text.trim() !== field.name);
  function commit() {
    const next = text.trim();
    if (next === field.name) return setError(null);
    if (!NAME.test(next)) return setError("Letters, digits and _, not starting with a digit.");
    if (fields.some((f) => f !== field && f.name === next)) return setError(`“${next}” is already a field.`);
    setError(null);
    onRename(next);
  }
  return (
    <div className="form-field input-field__name">
      <label htmlFor={id}>Field name</label>
      <input
        id={id}
        className="mono"
        value={text}
        autoComplete="off"
        spellCheck={false}
        aria-invalid={error ? true : undefined}
        onChange={(e) => setText(e.target.value)}
        onBlur={commit}
        onKeyDown={(e) => e.key === "Enter" && commit()}
      />
      {error && <p className="field-errors">{error}</p>}
    </div>
  );
}

/** The default of one field, as an input of its type (JSON for lists and objects). */
function DefaultInput({ id, field, onDefault }: { id: string; field: InputField; onDefault(value: unknown): void }) {
  const label = <label htmlFor={id}>Default</label>;
  if (field.type === "boolean") {
    return (
      <div className="form-field">
        {label}
        <select id={id} value={field.default === true ? "yes" : field.default === false ? "no" : ""}
          onChange={(e) => onDefault(e.target.value === "yes" ? true : e.target.value === "no" ? false : undefined)}>
          <option value="">No default</option>
          <option value="yes">Yes</option>
          <option value="no">No</option>
        </select>
      </div>
    );
  }
  if (field.type === "number" || field.type === "integer") {
    return (
      <div className="form-field">
        {label}
        <LocalNumberInput id={id} step={field.type === "integer" ? "1" : "any"} placeholder="no default" value={field.default} onNumber={onDefault} />
      </div>
    );
  }
  if (field.type === "string") {
    if (field.enum && field.enum.length > 0) {
      return (
        <div className="form-field">
          {label}
          <select id={id} value={typeof field.default === "string" ? field.default : ""} onChange={(e) => onDefault(e.target.value === "" ? undefined : e.target.value)}>
            <option value="">No default</option>
            {field.enum.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </div>
      );
    }
    return (
      <div className="form-field">
        {label}
        <LocalInput id={id} placeholder="no default" value={typeof field.default === "string" ? field.default : ""} onText={(t) => onDefault(t === "" ? undefined : t)} />
      </div>
    );
  }
  return (
    <div className="form-field">
      <label htmlFor={id}>Default ({field.type === "array" ? "a JSON list" : "a JSON object"})</label>
      <JsonValueEditor id={id} label="Default" value={field.default} onChange={onDefault} />
    </div>
  );
}

/**
 * The input schema's top-level properties as a list of fields. Edits rewrite ``properties``
 * and ``required`` only (``writeInputSchema``), so keys the list does not edit stay. A schema
 * the list cannot show (``readInputSchema`` problems) opens as JSON, saying why; "Edit as
 * JSON" is always there for what the list does not offer.
 */
export function InputSchemaEditor({ schema, onChange }: Props) {
  const read = readInputSchema(schema);
  const [asJson, setAsJson] = useState(false);
  const [jsonError, setJsonError] = useState<string | null>(null);
  const showJson = asJson || !read.ok;

  const toggle = (
    <label className="input-schema__toggle">
      <input type="checkbox" checked={showJson} disabled={!read.ok} onChange={(e) => setAsJson(e.target.checked)} /> Edit as JSON
    </label>
  );

  if (showJson) {
    return (
      <div className="input-schema">
        {toggle}
        {!read.ok && (
          <div className="input-schema__note" role="note">
            <p>The field list cannot show this schema, so it is edited as JSON:</p>
            <ul>
              {read.problems.map((p, i) => (
                <li key={i}>{p}</li>
              ))}
            </ul>
          </div>
        )}
        <JsonValueEditor
          id="graph.input_schema"
          label="Input schema"
          value={schema}
          onChange={(value) => {
            if (value === undefined) {
              setJsonError(null);
              return onChange(() => ({ type: "object" }), "graph:input_schema");
            }
            if (typeof value !== "object" || value === null || Array.isArray(value)) return setJsonError("The input schema must be a JSON object.");
            setJsonError(null);
            onChange(() => value as Record<string, unknown>, "graph:input_schema");
          }}
        />
        {jsonError && <p className="field-errors">{jsonError}</p>}
      </div>
    );
  }

  const fields = read.fields;
  // Every edit reads the current schema's fields and changes them by position.
  const put = (edit: (current: InputField[]) => InputField[], key: string) =>
    onChange((current) => {
      const now = readInputSchema(current);
      return now.ok ? writeInputSchema(current, edit(now.fields)) : current;
    }, `graph:input_schema:${key}`);
  const patchAt = (i: number, patch: (f: InputField) => InputField) => (current: InputField[]) => current.map((g, j) => (j === i ? patch(g) : g));
  const update = (i: number, patch: Partial<InputField>, key: string) => put(patchAt(i, (g) => ({ ...g, ...patch })), `${fields[i]?.name}:${key}`);
  return (
    <div className="input-schema" id="graph.input_schema" tabIndex={-1}>
      {toggle}
      {fields.length === 0 && <p className="panel-empty">No input fields: a run starts without input.</p>}
      <ol className="input-fields" aria-label="Input fields">
        {fields.map((f, i) => {
          const base = `graph.input_schema.properties.${f.name}`;
          const kept = keptSummary(f);
          return (
            <li key={`${i}`} className="input-field" aria-label={`Input field ${f.name}`}>
              <div className="input-field__top">
                <NameInput id={`${base}.name`} field={f} fields={fields} onRename={(name) => put(patchAt(i, (g) => ({ ...g, name })), `rename:${f.name}`)} />
                <div className="form-field">
                  <label htmlFor={`${base}.type`}>Type</label>
                  <select id={`${base}.type`} value={f.type} onChange={(e) => { const type = e.target.value as FieldType; put(patchAt(i, (g) => withType(g, type)), `${f.name}:type`); }}>
                    {FIELD_TYPES.map((t) => (
                      <option key={t.value} value={t.value}>
                        {t.label}
                      </option>
                    ))}
                  </select>
                </div>
                <label className="input-field__required">
                  <input type="checkbox" checked={f.required} onChange={(e) => update(i, { required: e.target.checked }, "required")} /> Required
                </label>
                <Button size="small" icon aria-label={`Remove input field ${f.name}`} onClick={() => put((current) => current.filter((_, j) => j !== i), `remove:${f.name}`)}>
                  ✕
                </Button>
              </div>
              <div className="form-field">
                <label htmlFor={`${base}.description`}>Description</label>
                <LocalInput id={`${base}.description`} placeholder="Shown under the field in the start-run form" value={f.description} onText={(description) => update(i, { description }, "description")} />
              </div>
              {f.type === "string" && (
                <div className="form-field">
                  <label htmlFor={`${base}.enum`}>Allowed values</label>
                  <LocalTextarea
                    id={`${base}.enum`}
                    rows={2}
                    placeholder="Any text. Or one value per line: a choice"
                    value={(f.enum ?? []).join("\n")}
                    onText={(t) => {
                      const values = [...new Set(t.split("\n").map((v) => v.trim()).filter((v) => v !== ""))];
                      put(patchAt(i, (g) => {
                        const dflt = typeof g.default === "string" && values.length > 0 && !values.includes(g.default) ? undefined : g.default;
                        return { ...g, enum: values.length > 0 ? values : undefined, default: dflt };
                      }), `${f.name}:enum`);
                    }}
                  />
                </div>
              )}
              <DefaultInput id={`${base}.default`} field={f} onDefault={(value) => update(i, { default: value }, "default")} />
              {kept && <p className="field-help">Also checked: {kept} (edit as JSON to change).</p>}
            </li>
          );
        })}
      </ol>
      <Button onClick={() => {
        const name = freshFieldName(fields);
        put((current) => [...current, { name: freshFieldName(current), type: "string", required: false, description: "", raw: { type: "string" } }], `add:${name}`);
      }}>
        Add input field
      </Button>
    </div>
  );
}
