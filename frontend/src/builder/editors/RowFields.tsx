// rjsf fields edited as rows the user adds: a map of state key -> expression (a transform's ``set``) and a list of state keys (an end node's ``output``).
import type { ErrorSchema, FieldProps } from "@rjsf/utils";
import { useEffect, useRef, useState } from "react";
import { usePendingEdit } from "../pendingEdits";
import { CodeEditor } from "./CodeEditor";
import type { EditorFormContext } from "./formContext";
import { Button } from "../../shell/Button";

/** A state key: letters, digits and _, not starting with a digit (runs/nodes/shared.py STATE_KEY_PATTERN). */
export const STATE_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const KEY_HINT = "Letters, digits and _, not starting with a digit.";

interface Row {
  /** Stable React key and DOM id part of a row, whatever its state key becomes. */
  rid: number;
  key: string;
  value: string;
  /** The user has changed this row's value or left its value editor (or the row was saved before). */
  touched: boolean;
}

let nextRid = 1;

function rowsOfMap(map: unknown): Row[] {
  const entries = map && typeof map === "object" && !Array.isArray(map) ? Object.entries(map as Record<string, unknown>) : [];
  return entries.map(([key, value]) => ({ rid: nextRid++, key, value: typeof value === "string" ? value : JSON.stringify(value), touched: true }));
}

function rowsOfList(list: unknown): Row[] {
  return (Array.isArray(list) ? list : []).map((v) => ({ rid: nextRid++, key: typeof v === "string" ? v : String(v), value: "", touched: true }));
}

/**
 * Why a row's key is not saved. An empty row is just not saved yet (no message); a row with
 * an expression but no key says so, or the expression would vanish at the next reload.
 */
function keyProblem(rows: readonly Row[], row: Row): string | null {
  const key = row.key.trim();
  if (key === "") return row.value.trim() === "" ? null : "Not saved until it has a state key.";
  if (!STATE_KEY.test(key)) return KEY_HINT;
  if (rows.find((r) => r.key.trim() === key) !== row) return `“${key}” is listed twice; only the first counts.`;
  return null;
}

/** The rows that are saved: a non-empty, valid key seen for the first time. */
function savedRows(rows: readonly Row[]): Row[] {
  return rows.filter((r) => r.key.trim() !== "" && keyProblem(rows, r) === null);
}

/**
 * Rows kept in local state and written to the form as a value. An untouched new row (empty
 * key) is never written, so it cannot be flagged before the user typed anything. Outside
 * changes (undo, another node) replace the rows unless focus is inside the field (the panel
 * may render a copy a few keystrokes old while the user types).
 */
function useRows(value: unknown, toRows: (v: unknown) => Row[], toValue: (rows: Row[]) => unknown) {
  const [rows, setRows] = useState<Row[]>(() => toRows(value));
  const box = useRef<HTMLDivElement>(null);
  const written = useRef(JSON.stringify(value ?? null));
  const focusRid = useRef<number | null>(null);
  const incoming = JSON.stringify(value ?? null);
  if (incoming !== written.current && !box.current?.contains(document.activeElement)) {
    written.current = incoming;
    setRows(toRows(value));
  }
  function update(next: Row[], write: (v: unknown) => void) {
    setRows(next);
    const out = toValue(savedRows(next));
    const text = JSON.stringify(out ?? null);
    if (text !== written.current) {
      written.current = text;
      write(out);
    }
  }
  useEffect(() => {
    if (focusRid.current === null) return;
    const el = box.current?.querySelector<HTMLInputElement>(`[data-rid="${focusRid.current}"]`);
    focusRid.current = null;
    el?.focus();
  });
  function add(): Row[] {
    const row: Row = { rid: nextRid++, key: "", value: "", touched: false };
    focusRid.current = row.rid;
    return [...rows, row];
  }
  return { rows, box, update, add };
}

function errorsAt(errorSchema: ErrorSchema | undefined, key: string): string[] {
  const at = (errorSchema as Record<string, { __errors?: string[] }> | undefined)?.[key];
  return at?.__errors ?? [];
}

function FieldHead({ id, title, description, required }: { id: string; title: string; description?: string; required?: boolean }) {
  return (
    <>
      <label htmlFor={id} className="control-label">
        {title}
        {required ? <span className="required"> *</span> : null}
      </label>
      {description && <p className="field-help">{description}</p>}
    </>
  );
}

function ErrorList({ id, errors }: { id?: string; errors: readonly string[] }) {
  if (errors.length === 0) return null;
  return (
    <ul className="field-errors" id={id}>
      {errors.map((e, i) => (
        <li key={i}>{e}</li>
      ))}
    </ul>
  );
}

/** How a map of rows is labelled and edited (a transform's ``set``, a tool's extra arguments). */
export interface MapRowsProps {
  /** The field's id: the value editor of key ``k`` has the id ``<id>.k``. */
  id: string;
  value: unknown;
  onWrite(value: Record<string, string> | undefined): void;
  names: readonly string[];
  locked: boolean;
  errorSchema?: ErrorSchema;
  title: string;
  description?: string;
  required?: boolean;
  language: "expression" | "template";
  keyLabel: string;
  valueLabel: string;
  keyPlaceholder: string;
  valuePlaceholder: string;
  addLabel?: string;
  /** The id of the rows' box (default ``id``), when ``id`` names a box already. */
  boxId?: string;
  /** Keys owned by other inputs (a tool's named arguments): a row may not use them. */
  taken?: readonly string[];
}

/**
 * Rows of key -> code (expression or template). Add appends an empty row and focuses its key;
 * each value is a code editor (completions, the server's check as you type) with the graph
 * validation's errors for that key under it.
 */
export function MapRows(p: MapRowsProps) {
  const { id, names, locked, errorSchema, taken = [] } = p;
  const { rows, box, update, add } = useRows(p.value, rowsOfMap, (saved) => {
    const kept = saved.filter((r) => !taken.includes(r.key.trim()));
    return Object.fromEntries(kept.map((r) => [r.key.trim(), r.value]));
  });
  const problemOf = (row: Row) => (taken.includes(row.key.trim()) ? `“${row.key.trim()}” has its own field above.` : keyProblem(rows, row));
  // Typed but not saved (a value without a valid key): the save status and the leave
  // guard count it, as they count a field still being typed in.
  usePendingEdit(`${id}.unsaved-rows`, rows.some((r) => r.value.trim() !== "" && problemOf(r) !== null));
  const write = (v: unknown) => p.onWrite(v as Record<string, string> | undefined);
  const set = (rid: number, patch: Partial<Row>) => update(rows.map((r) => (r.rid === rid ? { ...r, ...patch } : r)), write);
  return (
    <div className="form-group form-field form-rows" ref={box} id={p.boxId ?? id} tabIndex={-1}>
      <FieldHead id={rows[0] ? `${id}.__key${rows[0].rid}` : (p.boxId ?? id)} title={p.title} description={p.description} required={p.required} />
      {rows.length > 0 && (
        <div className="rows-grid" role="group" aria-label={p.title}>
          <div className="rows-head" aria-hidden="true">
            <span>{p.keyLabel}</span>
            <span>{p.valueLabel}</span>
            <span />
          </div>
          {rows.map((row) => {
            const key = row.key.trim();
            const problem = problemOf(row);
            const valueId = key && !problem ? `${id}.${key}` : `${id}.__value${row.rid}`;
            const serverErrors = key && !problem && row.touched ? errorsAt(errorSchema, key) : [];
            return (
              <div className="rows-row" key={row.rid}>
                <div className="rows-cell">
                  <input
                    id={`${id}.__key${row.rid}`}
                    data-rid={row.rid}
                    className="form-control"
                    aria-label={p.keyLabel}
                    placeholder={p.keyPlaceholder}
                    value={row.key}
                    readOnly={locked}
                    autoComplete="off"
                    spellCheck={false}
                    aria-invalid={problem ? true : undefined}
                    onChange={(e) => set(row.rid, { key: e.target.value })}
                  />
                  {problem && <p className="field-errors">{problem}</p>}
                </div>
                <div className="rows-cell">
                  <CodeEditor
                    id={valueId}
                    value={row.value}
                    language={p.language}
                    names={names}
                    readOnly={locked}
                    placeholder={p.valuePlaceholder}
                    ariaLabel={key ? `${p.valueLabel} for ${key}` : p.valueLabel}
                    knownErrors={serverErrors}
                    onChange={(text) => set(row.rid, { value: text, touched: true })}
                    onBlur={() => {
                      if (!row.touched) set(row.rid, { touched: true });
                    }}
                  />
                  <ErrorList errors={serverErrors} />
                </div>
                <div className="rows-cell rows-actions">
                  {!locked && (
                    <Button variant="ghost" size="small" icon aria-label={key ? `Remove ${key}` : "Remove row"}
                      onClick={() => update(rows.filter((r) => r.rid !== row.rid), write)}>
                      ✕
                    </Button>
                  )}
                </div>
              </div>
            );
          })}
        </div>
      )}
      {!locked && (
        <Button size="small" onClick={() => update(add(), write)}>
          {p.addLabel ?? "Add"}
        </Button>
      )}
    </div>
  );
}

/**
 * ``ui:field: "expressionMap"``: state key -> expression, as rows with the columns "State
 * key" and "Expression" (``MapRows``). The value editor of key ``k`` has the id
 * ``<field id>.k``, so the error list can focus it.
 */
export function ExpressionMapField(props: FieldProps) {
  const { fieldPathId, formData, onChange, schema, name, errorSchema, readonly, disabled, required, registry } = props;
  const id = fieldPathId.$id;
  const names = (registry.formContext as EditorFormContext | undefined)?.names ?? [];
  return (
    <>
      <MapRows
        id={id}
        value={formData}
        onWrite={(v) => onChange(v as never, fieldPathId.path, undefined, id)}
        names={names}
        locked={Boolean(readonly || disabled)}
        errorSchema={errorSchema}
        title={schema.title ?? name}
        description={schema.description}
        required={required}
        language="expression"
        keyLabel="State key"
        valueLabel="Expression"
        keyPlaceholder="e.g. total"
        valuePlaceholder="e.g. price * quantity"
      />
      {/* The field's own errors (rawErrors) are listed by rjsf's field template under this one. */}
    </>
  );
}

/**
 * ``ui:field: "stateKeyList"``: a list of state keys (an end node's ``output``) as rows,
 * each offering the graph's names. An empty row is not saved (so it is not an error), and no
 * row at all leaves the field out (the kind's default: for an end node, the whole state).
 * The input of item ``i`` of the saved list has the id ``<field id>.i``.
 */
export function StateKeyListField(props: FieldProps) {
  const { fieldPathId, formData, onChange, schema, name, errorSchema, readonly, disabled, required, registry } = props;
  const id = fieldPathId.$id;
  const names = (registry.formContext as EditorFormContext | undefined)?.names ?? [];
  const write = (v: unknown) => onChange(v as never, fieldPathId.path, undefined, id);
  const { rows, box, update, add } = useRows(formData, rowsOfList, (saved) => (saved.length > 0 ? saved.map((r) => r.key.trim()) : undefined));
  const locked = Boolean(readonly || disabled);
  const saved = savedRows(rows);
  const listId = `${id}__names`;
  return (
    <div className="form-group form-field form-rows" ref={box} id={id} tabIndex={-1}>
      <FieldHead id={rows[0] ? `${id}.__key${rows[0].rid}` : id} title={schema.title ?? name} description={schema.description} required={required} />
      <datalist id={listId}>
        {names.map((n) => (
          <option key={n} value={n} />
        ))}
      </datalist>
      {rows.map((row) => {
        const problem = keyProblem(rows, row);
        const index = saved.indexOf(row);
        const serverErrors = index >= 0 ? errorsAt(errorSchema, String(index)) : [];
        return (
          <div className="rows-row rows-row--single" key={row.rid}>
            <div className="rows-cell">
              <input
                id={index >= 0 ? `${id}.${index}` : `${id}.__key${row.rid}`}
                data-rid={row.rid}
                className="form-control"
                aria-label="State key"
                list={listId}
                placeholder="e.g. answer"
                value={row.key}
                readOnly={locked}
                autoComplete="off"
                spellCheck={false}
                aria-invalid={problem || serverErrors.length ? true : undefined}
                onChange={(e) => update(rows.map((r) => (r.rid === row.rid ? { ...r, key: e.target.value } : r)), write)}
              />
              {problem && <p className="field-errors">{problem}</p>}
              <ErrorList errors={serverErrors} />
            </div>
            <div className="rows-cell rows-actions">
              {!locked && (
                <Button variant="ghost" size="small" icon aria-label={row.key ? `Remove ${row.key}` : "Remove row"}
                  onClick={() => update(rows.filter((r) => r.rid !== row.rid), write)}>
                  ✕
                </Button>
              )}
            </div>
          </div>
        );
      })}
      {!locked && (
        <Button size="small" onClick={() => update(add(), write)}>
          Add
        </Button>
      )}
      {/* The field's own errors (rawErrors) are listed by rjsf's field template under this one. */}
    </div>
  );
}
