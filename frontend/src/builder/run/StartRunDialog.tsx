// Start a run from the builder: an input form generated from the graph's input schema, then the run's page.
import type { ErrorSchema, RJSFSchema } from "@rjsf/utils";
import type { RunDetail } from "../../api/types";
import Form from "@rjsf/core";
import { validator } from "../../lib/formValidator";
import { useEffect, useMemo, useRef, useState } from "react";
import { api, ApiError } from "../../lib/api";
import { simplifySchema } from "../editors/fields";
import { editorFieldComponents } from "../editors/widgets";
import { errorSchemaFor } from "../panel/paths";
import "../panel/panel.css";
import type { GraphSpec } from "../spec";
import { Button } from "../../shell/Button";
import { inputFormHints } from "./inputHints";

export interface StartRunDialogProps {
  graphId: number;
  spec: GraphSpec;
  onClose(): void;
  /** Version to run (default: the latest published). */
  version?: number;
  /** Where to go once the run exists (default: the browser navigates there). */
  navigate?(url: string): void;
  /** Which version runs, in words; ``warn`` marks it as a warning (the draft differs). */
  note?: { text: string; warn: boolean };
  /** The input the form starts with (the draft's pinned test input). */
  initialInput?: Record<string, unknown>;
  /**
   * Run the draft instead of a version: starts the run with the input (the builder's "Run
   * draft", builder/run/draftRun.ts), then ``onStarted`` gets it and the dialog closes; no page change.
   */
  draftRun?: { start(input: Record<string, unknown>): Promise<RunDetail>; onStarted(run: RunDetail): void };
}

/** The input schema as a form schema: an object, ``X | None`` collapsed, its own title left to the dialog. */
export function inputFormSchema(spec: GraphSpec): Record<string, unknown> {
  const raw = spec.input_schema && Object.keys(spec.input_schema).length > 0 ? spec.input_schema : { type: "object" };
  const { title: _t, ...rest } = simplifySchema(raw);
  void _t;
  return rest.type === undefined ? { ...rest, type: "object" } : rest;
}

/** A free-form object (no properties) is edited as JSON rather than as an empty form. */
function isFreeForm(schema: Record<string, unknown>): boolean {
  const props = schema.properties;
  return schema.type === "object" && (!props || Object.keys(props as object).length === 0) && schema.additionalProperties !== false;
}

/**
 * A modal dialog: fill in the input, POST /api/v1/runs/ ``{graph, version?, input}``, then go
 * to ``/runs/<id>/``. Validates against the schema on submit; server field errors (``input.x``)
 * are shown on their fields. Escape or Cancel closes it.
 */
export function StartRunDialog({ graphId, spec, onClose, version, navigate, note, initialInput, draftRun }: StartRunDialogProps) {
  const schema = useMemo(() => inputFormSchema(spec), [spec]);
  const freeForm = isFreeForm(schema);
  // Each field's example (or default) as its placeholder, its pattern as help: what a valid value looks like.
  const uiSchema = useMemo(() => ({ ...inputFormHints(schema), "ui:submitButtonOptions": { norender: true } }), [schema]);
  const [input, setInput] = useState<Record<string, unknown>>(() => initialInput ?? {});
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [fieldErrors, setFieldErrors] = useState<ErrorSchema>({});
  // The free-form JSON box's problem (not JSON, not an object): shown by the box, blocks submit.
  const [jsonProblem, setJsonProblem] = useState<string | null>(null);
  const dialog = useRef<HTMLDivElement>(null);

  useEffect(() => {
    // Focus the first input so the keyboard starts in the form.
    const first = dialog.current?.querySelector<HTMLElement>("input, textarea, select, [contenteditable=true], button");
    first?.focus();
  }, []);

  async function start(data: Record<string, unknown>) {
    setBusy(true);
    setError(null);
    setFieldErrors({});
    try {
      if (draftRun) {
        draftRun.onStarted(await draftRun.start(data));
        onClose();
        return;
      }
      const body: Record<string, unknown> = { graph: graphId, input: data };
      if (version !== undefined) body.version = version;
      const run = await api<RunDetail>("runs/", { method: "POST", body });
      (navigate ?? ((url: string) => window.location.assign(url)))(`/runs/${run.id}/`);
      onClose();
    } catch (err) {
      setBusy(false);
      if (err instanceof ApiError) {
        const issues = Object.entries(err.fields).map(([path, messages]) => ({ code: "invalid", node: null, node_id: null, field: path, path, message: messages.join(" ") }));
        const { schema: placedSchema, placed } = errorSchemaFor(issues, "input");
        const rest = issues.filter((i) => !placed.includes(i)).map((i) => `${i.field}: ${i.message}`);
        setFieldErrors(placedSchema);
        const noVersion = err.status === 400 && /version/i.test(err.message) && placed.length === 0;
        setError(
          noVersion
            ? `${err.message} Runs use a published version: publish the draft first.`
            : [err.message, ...rest].join(" "),
        );
      } else {
        setError(err instanceof Error ? err.message : String(err));
      }
    }
  }

  return (
    <div className="run-dialog-backdrop" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div
        ref={dialog}
        className="run-dialog nokey"
        role="dialog"
        aria-modal="true"
        aria-labelledby="start-run-title"
        onKeyDown={(e) => {
          if (e.key === "Escape") {
            e.stopPropagation();
            onClose();
          }
        }}
      >
        <h2 id="start-run-title">{draftRun ? `Run the draft of “${spec.name}”` : `Start a run of “${spec.name}”`}</h2>
        {note?.warn ? (
          <p className="run-dialog__warning" role="note">{note.text}</p>
        ) : (
          <p className="field-help run-dialog__version">
            {note?.text ?? (version !== undefined ? `Runs version ${version}.` : "Runs the latest published version.")}
          </p>
        )}
        {!freeForm && <FormHelp schema={schema} />}
        {initialInput && (
          <p className="field-help run-dialog__pinned" role="note">
            Prefilled with the draft's pinned test input (Triggers → Listen for test event).
          </p>
        )}
        {typeof schema.description === "string" && schema.description && <p className="field-help">{schema.description}</p>}
        {error && (
          <p className="panel-error" role="alert">
            {error}
          </p>
        )}
        <Form
          schema={(freeForm ? { type: "object", properties: {} } : schema) as RJSFSchema}
          uiSchema={uiSchema}
          formData={input}
          validator={validator}
          fields={editorFieldComponents}
          extraErrors={fieldErrors}
          idPrefix="input"
          idSeparator="."
          noHtml5Validate
          showErrorList={false}
          // Validated on submit only: live validation on blur showed a stale error while the last
          // field was typed in, then removed it on blur, so the dialog shrank and the button moved
          // out from under the pointer and the first click on Start run was lost.
          onChange={(e) => setInput((e.formData ?? {}) as Record<string, unknown>)}
          onSubmit={(e) => {
            if (freeForm && jsonProblem) {
              document.getElementById("input.json")?.focus();
              return;
            }
            void start(freeForm ? input : ((e.formData ?? {}) as Record<string, unknown>));
          }}
          id="start-run-form"
        >
          {freeForm && (
            <FreeFormInput value={input} onChange={setInput} stateKeys={Object.keys(spec.state ?? {})} onProblem={setJsonProblem} />
          )}
          {/* Cancel, then the action on the right: the order of every dialog in the app. */}
          <div className="button-row run-dialog-buttons">
            <Button onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" variant="primary" disabled={busy}>
              {busy ? "Starting…" : draftRun ? "Run draft" : "Start run"}
            </Button>
          </div>
        </Form>
      </div>
    </div>
  );
}

/** What the form is, in words: the graph's input schema, and how nodes read a field (its first one as the example). */
function FormHelp({ schema }: { schema: Record<string, unknown> }) {
  const first = Object.keys((schema.properties as Record<string, unknown> | undefined) ?? {})[0];
  return (
    <p className="field-help run-dialog__help">
      The run's input. These fields come from the graph's input schema (Graph settings → Input schema)
      {first ? <>; nodes read a field as <code>input.{first}</code></> : null}.
    </p>
  );
}

/** Why ``text`` is not a run input (a JSON object), or null when it is one. */
export function jsonInputProblem(text: string): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.trim() === "" ? "{}" : text);
  } catch (err) {
    return `Not valid JSON: ${err instanceof Error ? err.message : String(err)} (strings need double quotes: {"topic": "AI"}).`;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return `The input must be a JSON object ({"key": value}), not ${Array.isArray(parsed) ? "a list" : parsed === null ? "null" : `a ${typeof parsed}`}.`;
  }
  return null;
}

function FreeFormInput({ value, onChange, stateKeys, onProblem }: {
  value: Record<string, unknown>;
  onChange(v: Record<string, unknown>): void;
  /** The graph's declared state keys (named in the help: the input's keys become state). */
  stateKeys: string[];
  onProblem(problem: string | null): void;
}) {
  const [text, setText] = useState(() => JSON.stringify(value, null, 2));
  const [problem, setProblem] = useState<string | null>(null);
  return (
    <div className="form-field">
      <label htmlFor="input.json">Input (JSON object)</label>
      <p className="field-help" id="input.json-help">
        This graph's input schema lists no fields, so type the run's input as a JSON object, e.g.{" "}
        <code>{'{"topic": "AI"}'}</code>. Nodes read a key the schema does not declare as <code>input.topic</code>; declare it
        in the input schema to read it by name, <code>topic</code> (or <code>{"{{ topic }}"}</code>), like every state key.{" "}
        {stateKeys.length > 0
          ? <>A key named like one of the graph's state keys ({stateKeys.map((k, i) => <span key={k}>{i > 0 ? ", " : ""}<code>{k}</code></span>)}) also sets its starting value. </>
          : null}
        To get a form here instead, list the fields in Graph settings → Input schema.
      </p>
      <textarea
        id="input.json"
        className="mono"
        rows={6}
        value={text}
        aria-invalid={problem ? true : undefined}
        aria-describedby={problem ? "input.json-error" : "input.json-help"}
        onChange={(e) => {
          setText(e.target.value);
          const found = jsonInputProblem(e.target.value);
          setProblem(found);
          onProblem(found);
          if (!found) onChange(JSON.parse(e.target.value.trim() === "" ? "{}" : e.target.value) as Record<string, unknown>);
        }}
      />
      {problem && <p className="field-errors" id="input.json-error" role="alert">{problem}</p>}
    </div>
  );
}

export default StartRunDialog;
