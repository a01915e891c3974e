// The graph's declared state keys: name, reducer, default (typed where the type is plain, else JSON) and description.
import { useState } from "react";
import { LocalInput, LocalNumberInput } from "../editors/LocalText";
import { usePendingEdit } from "../pendingEdits";
import type { Reducer, StateKeySpec } from "../spec";
import { freshId } from "../spec";
import { displayValue } from "./format";
import { Button } from "../../shell/Button";

/** Reducers: a short name for the select (the panel is narrow), what it does as help under it. */
export const REDUCERS: { value: Reducer; label: string; help: string }[] = [
  { value: "replace", label: "Replace", help: "The last write wins." },
  { value: "append", label: "Append", help: "Each write adds its value to a list." },
  { value: "extend", label: "Extend", help: "Each write adds a list's items to a list." },
  { value: "add", label: "Add", help: "Writes are summed (numbers)." },
  { value: "merge", label: "Merge", help: "Writes are merged into one object." },
  { value: "max", label: "Max", help: "The largest value written is kept." },
  { value: "min", label: "Min", help: "The smallest value written is kept." },
];

/**
 * How a key's default is typed in: a number for a reducer that sums or compares numbers or a
 * number default, text or yes/no for a default of that type, JSON for the rest (lists,
 * objects, no default yet with a reducer that says nothing about the type).
 */
export function defaultInputKind(spec: StateKeySpec): "number" | "text" | "boolean" | "json" {
  const reducer = spec.reducer ?? "replace";
  // A default of another type is shown as what it is (JSON), never hidden by a number input.
  if (reducer === "add" || reducer === "max" || reducer === "min") return spec.default === undefined || typeof spec.default === "number" ? "number" : "json";
  if (reducer !== "replace") return "json";
  if (typeof spec.default === "number") return "number";
  if (typeof spec.default === "string") return "text";
  if (typeof spec.default === "boolean") return "boolean";
  return "json";
}

const KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

type StateMap = Record<string, StateKeySpec>;

interface Props {
  state: StateMap;
  readOnly: boolean;
  /** Apply a new state map as an undo step; ``key`` coalesces typing in one field. */
  onChange(next: StateMap, key: string): void;
  errors: Record<string, string[]>;
}

/** Rename ``from`` to ``to`` keeping the keys' order. */
function renamed(state: StateMap, from: string, to: string): StateMap {
  return Object.fromEntries(Object.entries(state).map(([k, v]) => [k === from ? to : k, v]));
}

interface DefaultFieldProps {
  base: string;
  spec: StateKeySpec;
  /** The JSON text field's own state (kept by the row, committed on blur). */
  json: { text: string; setText(text: string): void; commit(): void; error: string | null };
  onDefault(value: unknown): void;
}

/** The default as a number, text or yes/no input when the type is plain (``defaultInputKind``), else as JSON. */
function DefaultField({ base, spec, json, onDefault }: DefaultFieldProps) {
  const id = `${base}.default`;
  const kind = defaultInputKind(spec);
  if (kind === "number") {
    return (
      <div className="form-field">
        <label htmlFor={id}>Default</label>
        <LocalNumberInput id={id} step="any" placeholder="none" value={spec.default} onNumber={onDefault} />
      </div>
    );
  }
  if (kind === "text") {
    return (
      <div className="form-field">
        <label htmlFor={id}>Default (text)</label>
        <LocalInput id={id} value={typeof spec.default === "string" ? spec.default : ""} onText={(t) => onDefault(t === "" ? undefined : t)} />
      </div>
    );
  }
  if (kind === "boolean") {
    return (
      <div className="form-field">
        <label htmlFor={id}>Default</label>
        <select id={id} value={spec.default === true ? "yes" : "no"} onChange={(e) => onDefault(e.target.value === "" ? undefined : e.target.value === "yes")}>
          <option value="">No default</option>
          <option value="yes">Yes (true)</option>
          <option value="no">No (false)</option>
        </select>
      </div>
    );
  }
  const reducer = spec.reducer ?? "replace";
  const hint = reducer === "append" || reducer === "extend" ? "a list, e.g. []" : reducer === "merge" ? "an object, e.g. {}" : "JSON: \"text\", 3, true, [], {}";
  return (
    <div className="form-field">
      <label htmlFor={id}>Default (JSON)</label>
      <input
        id={id}
        className="mono"
        value={json.text}
        placeholder={hint}
        onChange={(e) => json.setText(e.target.value)}
        onBlur={json.commit}
        aria-invalid={json.error ? true : undefined}
      />
      {json.error && <p className="field-errors">{json.error}</p>}
    </div>
  );
}

function KeyRow({ name, spec, state, onChange, errors }: { name: string; spec: StateKeySpec; state: StateMap; onChange: Props["onChange"]; errors: string[] }) {
  const [nameText, setNameText] = useState(name);
  const [defaultText, setDefaultText] = useState(spec.default === undefined ? "" : JSON.stringify(spec.default));
  const [nameError, setNameError] = useState<string | null>(null);
  const [defaultError, setDefaultError] = useState<string | null>(null);
  const base = `graph.state.${name}`;
  const savedDefault = spec.default === undefined ? "" : JSON.stringify(spec.default);
  // Typed but not yet committed (on blur): the draft counts as unsaved and the leave guard holds.
  usePendingEdit(`${base}.name`, nameText.trim() !== name);
  usePendingEdit(`${base}.default`, defaultText.trim() !== savedDefault && (() => {
    try { return JSON.stringify(JSON.parse(defaultText)) !== savedDefault; } catch { return true; }
  })());

  function commitName() {
    const next = nameText.trim();
    if (next === name) return setNameError(null);
    if (!KEY_PATTERN.test(next)) return setNameError("Letters, digits and _, not starting with a digit.");
    if (next in state) return setNameError(`“${next}” is already a state key.`);
    setNameError(null);
    onChange(renamed(state, name, next), `graph:state:rename:${name}`);
  }

  function commitDefault() {
    if (defaultText.trim() === "") {
      setDefaultError(null);
      const { default: _d, ...rest } = spec;
      void _d;
      return onChange({ ...state, [name]: rest }, `graph:state:${name}:default`);
    }
    try {
      const parsed: unknown = JSON.parse(defaultText);
      setDefaultError(null);
      onChange({ ...state, [name]: { ...spec, default: parsed } }, `graph:state:${name}:default`);
    } catch {
      setDefaultError("Not valid JSON (strings need quotes: \"text\").");
    }
  }

  return (
    <fieldset className="state-key-row" aria-label={`State key ${name}`} id={base} tabIndex={-1}>
      <div className="form-field">
        <label htmlFor={`${base}.name`}>Key</label>
        <input
          id={`${base}.name`}
          value={nameText}
          onChange={(e) => setNameText(e.target.value)}
          onBlur={commitName}
          onKeyDown={(e) => e.key === "Enter" && commitName()}
          aria-invalid={nameError ? true : undefined}
        />
        {nameError && <p className="field-errors">{nameError}</p>}
      </div>
      <div className="form-field">
        <label htmlFor={`${base}.reducer`}>Reducer</label>
        <select
          id={`${base}.reducer`}
          aria-describedby={`${base}.reducer-help`}
          value={spec.reducer ?? "replace"}
          onChange={(e) => onChange({ ...state, [name]: { ...spec, reducer: e.target.value as Reducer } }, `graph:state:${name}:reducer`)}
        >
          {REDUCERS.map((r) => (
            <option key={r.value} value={r.value}>
              {r.label}
            </option>
          ))}
        </select>
        <p className="field-help" id={`${base}.reducer-help`}>
          {REDUCERS.find((r) => r.value === (spec.reducer ?? "replace"))?.help}
        </p>
      </div>
      <DefaultField base={base} spec={spec} json={{ text: defaultText, setText: setDefaultText, commit: commitDefault, error: defaultError }}
        onDefault={(value) => {
          const { default: _d, ...rest } = spec;
          void _d;
          setDefaultText(value === undefined ? "" : JSON.stringify(value));
          onChange({ ...state, [name]: value === undefined ? rest : { ...rest, default: value } }, `graph:state:${name}:default`);
        }} />
      <div className="form-field">
        <label htmlFor={`${base}.description`}>Description</label>
        <LocalInput
          id={`${base}.description`}
          value={spec.description ?? ""}
          onText={(description) => onChange({ ...state, [name]: { ...spec, description } }, `graph:state:${name}:description`)}
        />
      </div>
      {errors.length > 0 && (
        <ul className="field-errors">
          {errors.map((e, i) => (
            <li key={i}>{e}</li>
          ))}
        </ul>
      )}
      <Button
        size="small"
        aria-label={`Remove state key ${name}`}
        onClick={() => {
          const { [name]: _removed, ...rest } = state;
          void _removed;
          onChange(rest, `graph:state:remove:${name}`);
        }}
      >
        Remove
      </Button>
    </fieldset>
  );
}

/** The state-key table. Names and defaults are committed on blur (a half-typed name is not a key yet). */
export function StateKeysEditor({ state, readOnly, onChange, errors }: Props) {
  const entries = Object.entries(state);
  if (readOnly) {
    if (entries.length === 0) return <p className="panel-empty">No declared state keys.</p>;
    return (
      <table className="readonly-table">
        <thead>
          <tr>
            <th>Key</th>
            <th>Reducer</th>
            <th>Default</th>
            <th>Description</th>
          </tr>
        </thead>
        <tbody>
          {entries.map(([k, s]) => (
            <tr key={k}>
              <td>
                <code>{k}</code>
              </td>
              <td>{s.reducer ?? "replace"}</td>
              <td>
                <code>{s.default === undefined ? "—" : JSON.stringify(s.default)}</code>
              </td>
              <td>{displayValue(s.description)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    );
  }
  return (
    <div className="state-keys">
      {entries.length === 0 && (
        <p className="panel-empty">No declared state keys. Input properties and keys nodes write are state keys too; declare one to give it a reducer or a default.</p>
      )}
      {entries.map(([k, s]) => (
        <KeyRow key={k} name={k} spec={s} state={state} onChange={onChange} errors={errors[k] ?? []} />
      ))}
      <Button
        onClick={() => {
          const name = freshId("key", new Set(Object.keys(state)));
          onChange({ ...state, [name]: { reducer: "replace" } }, `graph:state:add:${name}`);
        }}
      >
        Add state key
      </Button>
    </div>
  );
}
