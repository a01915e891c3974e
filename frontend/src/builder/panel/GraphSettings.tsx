// The side panel with nothing selected: the graph's name, description, input schema, state keys, limits, budget, cost, operators and retention.
import { useEffect, useMemo } from "react";
import { LocalInput, LocalTextarea } from "../editors/LocalText";
import type { GraphSettings as Settings, GraphSpec } from "../spec";
import { useBuilder } from "../store";
import { formatCost } from "../../shell/format";
import { costsSomething } from "../flow";
import { displayValue } from "./format";
import { pathParts } from "./paths";
import { GraphRecord } from "./GraphRecord";
import { InputSchemaEditor } from "./InputSchemaEditor";
import { StateKeysEditor } from "./StateKeysEditor";
import { Button } from "../../shell/Button";

interface NumberFieldProps {
  id: string;
  label: string;
  help: string;
  value: number | string | null | undefined;
  placeholder?: string;
  step?: string;
  min?: number;
  max?: number;
  errors: string[];
  readOnly: boolean;
  onChange(value: number | string | undefined): void;
  /** Keep the text as typed (money), instead of a number. */
  asText?: boolean;
}

function NumberField({ id, label, help, value, placeholder, step, min, max, errors, readOnly, onChange, asText }: NumberFieldProps) {
  const text = value === null || value === undefined ? "" : String(value);
  return (
    <div className="form-field">
      <label htmlFor={id}>{label}</label>
      {readOnly ? (
        <p className="readonly-value" id={id} tabIndex={-1}>
          {text || placeholder || "—"}
        </p>
      ) : (
        <input
          id={id}
          type="number"
          inputMode="decimal"
          value={text}
          placeholder={placeholder}
          step={step}
          min={min}
          max={max}
          aria-describedby={`${id}-help`}
          aria-invalid={errors.length > 0 ? true : undefined}
          onChange={(e) => {
            const raw = e.target.value;
            if (raw === "") return onChange(undefined);
            const n = Number(raw);
            if (Number.isFinite(n)) onChange(asText ? raw : n);
          }}
        />
      )}
      <p className="field-help" id={`${id}-help`}>
        {help}
      </p>
      {errors.length > 0 && (
        <ul className="field-errors">
          {errors.map((e, i) => (
            <li key={i}>{e}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

function withSetting(spec: GraphSpec, key: keyof Settings, value: unknown): GraphSpec {
  const settings: Record<string, unknown> = { ...spec.settings };
  if (value === undefined) delete settings[key];
  else settings[key] = value;
  return { ...spec, settings: settings as Settings };
}

/** Graph-wide settings; every field is its own undo step while typing in it. */
export function GraphSettings() {
  const b = useBuilder();
  const { spec, readOnly } = b;
  const graphIssues = useMemo(() => (b.validation?.errors ?? []).filter((e) => e.node === null), [b.validation]);
  const byField = useMemo(() => {
    const out: Record<string, string[]> = {};
    for (const issue of graphIssues) {
      const key = issue.field ?? issue.path ?? "";
      (out[key] ??= []).push(issue.message);
    }
    return out;
  }, [graphIssues]);
  const stateErrors = useMemo(() => {
    const out: Record<string, string[]> = {};
    for (const [field, messages] of Object.entries(byField)) {
      const parts = pathParts(field);
      if (parts[0] === "state" && parts[1]) (out[parts[1]] ??= []).push(...messages);
    }
    return out;
  }, [byField]);
  const path = b.validation?.estimate?.costliest_path;
  const nodeName = (id: string) => spec.nodes.find((n) => n.id === id)?.label || id;
  const field = b.selection.field;

  useEffect(() => {
    if (!field || b.selection.nodes.length > 0) return;
    const el = document.getElementById(`graph.${pathParts(field).join(".")}`);
    el?.scrollIntoView?.({ block: "center", behavior: "smooth" });
    el?.focus({ preventScroll: true });
  }, [field, b.selection.nodes.length]);

  const errs = (f: string) => byField[f] ?? [];
  const settings = spec.settings ?? {};
  return (
    <div className="graph-settings" aria-label="Graph settings">
      <header className="panel-header">
        <h2>Graph settings</h2>
        <p className="field-help">Select a node to edit it; these apply to the whole graph.</p>
      </header>

      {graphIssues.length > 0 && (
        <section className="panel-section panel-issues" aria-label="Problems">
          <h3>
            {graphIssues.length} graph-wide problem{graphIssues.length === 1 ? "" : "s"}
          </h3>
          <ul>
            {graphIssues.map((issue, i) => (
              <li key={i}>
                {issue.field ? <code>{issue.field}</code> : null} {issue.message}
              </li>
            ))}
          </ul>
        </section>
      )}

      <section className="panel-section" aria-label="Estimated cost">
        <h3>Estimated cost</h3>
        {path ? (
          <>
            <p>
              Costliest path: <strong>{formatCost(path)}</strong>
            </p>
            {path.nodes.length > 0 && (
              <ol className="costliest-path" aria-label="Costliest path">
                {path.nodes.map((id) => (
                  <li key={id}>
                    <Button variant="link" onClick={() => b.select({ nodes: [id], edges: [], notes: [], field: null })}>
                      {nodeName(id)}
                    </Button>
                    {costsSomething(b.validation?.estimate?.nodes[id]) && <span className="muted"> {formatCost(b.validation?.estimate?.nodes[id])}</span>}
                  </li>
                ))}
              </ol>
            )}
          </>
        ) : (
          <p className="panel-empty">{b.validation ? "No estimate for this graph." : "The estimate appears once the graph has been checked."}</p>
        )}
      </section>

      <section className="panel-section" aria-label="General">
        <h3>General</h3>
        <div className="form-field">
          <label htmlFor="graph.name">Name</label>
          {readOnly ? (
            <p className="readonly-value">{spec.name}</p>
          ) : (
            <LocalInput
              id="graph.name"
              value={spec.name}
              maxLength={200}
              required
              aria-invalid={errs("name").length > 0 || !spec.name ? true : undefined}
              onText={(name) => b.change((s) => ({ ...s, name }), "graph:name")}
            />
          )}
          {!spec.name && !readOnly && <p className="field-errors">A graph needs a name.</p>}
          {errs("name").map((m, i) => (
            <p key={i} className="field-errors">
              {m}
            </p>
          ))}
        </div>
        <div className="form-field">
          <label htmlFor="graph.description">Description</label>
          {readOnly ? (
            <p className="readonly-value">{displayValue(spec.description)}</p>
          ) : (
            <LocalTextarea
              id="graph.description"
              rows={3}
              value={spec.description ?? ""}
              onText={(description) => b.change((s) => ({ ...s, description }), "graph:description")}
            />
          )}
        </div>
      </section>

      <section className="panel-section" aria-label="Input">
        <h3>Input schema</h3>
        <p className="field-help" id="graph.input_schema-help">
          The fields a run's input has; the start-run form asks for them. Each is a state key from the run's start: read it by
          name, <code>topic</code> in expressions and <code>{"{{ topic }}"}</code> in templates (the variable picker writes it so).
          <code>input.topic</code> is the input as given, for keys not declared here.
        </p>
        {readOnly ? (
          <pre className="readonly-value">{displayValue(spec.input_schema ?? { type: "object" })}</pre>
        ) : (
          <InputSchemaEditor schema={spec.input_schema ?? { type: "object" }} onChange={(edit, key) => b.change((s) => ({ ...s, input_schema: edit(s.input_schema ?? { type: "object" }) }), key)} />
        )}
        {errs("input_schema").map((m, i) => (
          <p key={i} className="field-errors">
            {m}
          </p>
        ))}
      </section>

      <section className="panel-section" aria-label="State keys">
        <h3>State keys</h3>
        <p className="field-help">A reducer says how writes to one key combine (parallel branches, loops).</p>
        <StateKeysEditor
          state={spec.state ?? {}}
          readOnly={readOnly}
          errors={stateErrors}
          onChange={(state, key) => b.change((s) => ({ ...s, state }), key)}
        />
      </section>

      <section className="panel-section" aria-label="Limits and budget">
        <h3>Limits and budget</h3>
        <NumberField
          id="graph.settings.max_parallelism"
          label="Max parallelism"
          help="Steps of one run that may execute at once (1–256)."
          value={settings.max_parallelism}
          placeholder="4"
          min={1}
          max={256}
          step="1"
          errors={errs("settings.max_parallelism")}
          readOnly={readOnly}
          onChange={(v) => b.change((s) => withSetting(s, "max_parallelism", v), "graph:settings.max_parallelism")}
        />
        <NumberField
          id="graph.settings.max_steps"
          label="Max steps"
          help="A run stops after this many steps (1–100000), so a loop cannot run forever."
          value={settings.max_steps}
          placeholder="1000"
          min={1}
          max={100000}
          step="1"
          errors={errs("settings.max_steps")}
          readOnly={readOnly}
          onChange={(v) => b.change((s) => withSetting(s, "max_steps", v), "graph:settings.max_steps")}
        />
        <NumberField
          id="graph.settings.budget_usd"
          label="Budget (USD)"
          help="A run pauses before a step that could take it past this spend. Empty: no limit."
          value={settings.budget_usd}
          placeholder="no limit"
          min={0}
          step="0.01"
          asText
          errors={errs("settings.budget_usd")}
          readOnly={readOnly}
          onChange={(v) => b.change((s) => withSetting(s, "budget_usd", v), "graph:settings.budget_usd")}
        />
        <NumberField
          id="graph.settings.budget_tokens"
          label="Budget (tokens)"
          help="The same for tokens (input plus output). Empty: no limit."
          value={settings.budget_tokens}
          placeholder="no limit"
          min={0}
          step="1"
          errors={errs("settings.budget_tokens")}
          readOnly={readOnly}
          onChange={(v) => b.change((s) => withSetting(s, "budget_tokens", v), "graph:settings.budget_tokens")}
        />
      </section>

      <GraphRecord readOnly={readOnly} />
    </div>
  );
}
