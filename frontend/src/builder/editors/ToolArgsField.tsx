// A tool node's ``args``: one named template field per argument of the picked tool (from its JSON Schema), extra keys as rows.
import type { ErrorSchema, FieldProps } from "@rjsf/utils";
import { CodeEditor } from "./CodeEditor";
import { MapRows } from "./RowFields";
import { examplePlaceholder, type EditorFormContext } from "./formContext";
import { JsonValueEditor } from "./JsonValueEditor";
import { Button } from "../../shell/Button";

type Schema = Record<string, unknown>;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** One argument of a tool, as its field shows it. */
export interface ArgumentField {
  name: string;
  title: string;
  required: boolean;
  /** The schema's description, then its allowed values and its type when not text. */
  help: string[];
  /** "default: X" for an argument with a default, else an example template. */
  placeholder: string | null;
  /** An object or a list: may be typed as JSON instead of a template. */
  structured: "object" | "array" | null;
}

const TYPE_WORDS: Record<string, string> = {
  integer: "a whole number",
  number: "a number",
  boolean: "true or false",
  array: "a list",
  object: "an object",
};

/** A short, readable form of a schema value (enum members, defaults). */
function shown(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * The named fields of a tool's argument schema, in the schema's order. The help says what a
 * value must be when that is not plain text, since every field takes a template: a value is
 * text unless it is exactly ``{{ expr }}`` (then it keeps the expression's type) or the tool
 * converts it (numbers typed as text are read as numbers).
 */
export function argumentFields(schema: Schema): ArgumentField[] {
  const props = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
  return Object.entries(props).map(([name, raw]) => {
    const s = isObject(raw) ? raw : {};
    const help: string[] = [];
    if (typeof s.description === "string" && s.description) help.push(s.description);
    if (Array.isArray(s.enum)) help.push(`One of: ${s.enum.map(shown).join(", ")}.`);
    else if (typeof s.type === "string" && TYPE_WORDS[s.type]) help.push(`${TYPE_WORDS[s.type]?.replace(/^./, (c) => c.toUpperCase())}.`);
    const hasDefault = s.default !== undefined && s.default !== null;
    return {
      name,
      title: typeof s.title === "string" && s.title ? s.title : name,
      required: required.has(name),
      help,
      placeholder: hasDefault ? `default: ${shown(s.default)}` : null,
      structured: s.type === "object" || s.type === "array" ? s.type : null,
    };
  });
}

/**
 * Whether the tool takes arguments its schema does not name. Tools' schemas come from
 * pydantic, which says ``additionalProperties: true`` (or a schema) only for ``extra="allow"``;
 * without the key, other arguments are ignored, with ``false`` refused.
 */
export function allowsExtraArguments(schema: Schema): boolean {
  return schema.additionalProperties === true || isObject(schema.additionalProperties);
}

/**
 * An example for an argument without a default: a whole-value template naming a state key
 * (the one named like the argument if there is one: ``{{ query }}`` for ``query``), else the
 * run input's field of that name.
 */
export function argumentExample(name: string, names: readonly string[]): string {
  if (names.includes(name)) return `e.g. {{ ${name} }}`;
  const key = names.find((n) => n !== "input");
  return key ? `e.g. {{ ${key} }}` : `e.g. {{ input.${name} }}`;
}

function errorsAt(errorSchema: ErrorSchema | undefined, key: string): string[] {
  const at = (errorSchema as Record<string, { __errors?: string[] }> | undefined)?.[key];
  return at?.__errors ?? [];
}

/**
 * ``ui:field: "toolArgs"``. With a picked tool whose schema is known (``formContext.tool``):
 * one template field per argument (title, required mark, description and allowed values as
 * help, the default as placeholder), then rows for other keys only when the tool accepts
 * them (``allowsExtraArguments``). Keys the tool does not take are still shown, with a remove button, never dropped
 * silently. Without a known tool: rows of argument name -> template. The editor of argument
 * ``k`` has the id ``<field id>.k`` (the error list focuses ``config.args.k``).
 */
export function ToolArgsField(props: FieldProps) {
  const { fieldPathId, formData, onChange, schema, name, errorSchema, readonly, disabled, registry } = props;
  const id = fieldPathId.$id;
  const ctx = registry.formContext as EditorFormContext | undefined;
  const names = ctx?.names ?? [];
  const tool = ctx?.tool ?? null;
  const locked = Boolean(readonly || disabled);
  const value: Record<string, unknown> = isObject(formData) ? formData : {};
  const write = (next: Record<string, unknown>) => onChange(next as never, fieldPathId.path, undefined, id);
  const title = schema.title ?? name;

  if (!tool) {
    return (
      <MapRows
        id={id}
        value={value}
        onWrite={(v) => write(v ?? {})}
        names={names}
        locked={locked}
        errorSchema={errorSchema}
        title={title}
        description={schema.description ?? "Pick a tool first to see its arguments; text values may be templates."}
        language="template"
        keyLabel="Argument"
        valueLabel="Value"
        keyPlaceholder="e.g. query"
        valuePlaceholder={examplePlaceholder("template", names)}
        addLabel="Add argument"
      />
    );
  }

  const graphInput = tool.of === "graph";
  const fields = argumentFields(tool.schema);
  const anyKey = names.find((n) => n !== "input");
  const example = anyKey ? `e.g. {{ ${anyKey} }}` : "e.g. {{ input.topic }}";
  const named = new Set(fields.map((f) => f.name));
  const extras = Object.fromEntries(Object.entries(value).filter(([k]) => !named.has(k)));
  const setArg = (key: string, v: unknown) => {
    const next = { ...value };
    if (v === undefined) delete next[key];
    else next[key] = v;
    write(next);
  };
  const writeExtras = (rows: Record<string, string> | undefined) => {
    const next: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (named.has(k)) next[k] = v;
    write({ ...next, ...(rows ?? {}) });
  };

  return (
    <fieldset className="tool-args" id={id} tabIndex={-1} aria-label={`${graphInput ? "Input of" : "Arguments of"} ${tool.name}`}>
      <legend>
        {graphInput ? "Input of" : "Arguments of"} <code>{tool.name}</code>
      </legend>
      <p className="field-help">
        Text, or a template using the state, {example}. Fields marked * are required.
      </p>
      {fields.length === 0 && <p className="panel-empty">{graphInput ? "This graph's input schema names no fields." : "This tool takes no arguments."}</p>}
      {fields.map((f) => {
        const fieldId = `${id}.${f.name}`;
        const errors = errorsAt(errorSchema, f.name);
        const current = value[f.name];
        const helpId = `${fieldId}__help`;
        return (
          <div className={`form-field tool-arg${errors.length ? " has-error" : ""}`} key={f.name}>
            <label htmlFor={fieldId}>
              {f.title}
              {f.required ? <span className="required"> *</span> : null}
              {f.title.toLowerCase().replace(/ /g, "_") !== f.name.toLowerCase() && <code className="tool-arg__name"> {f.name}</code>}
            </label>
            {f.help.length > 0 && (
              <p className="field-help" id={helpId}>
                {f.help.join(" ")}
              </p>
            )}
            {current !== undefined && current !== null && typeof current !== "string" ? (
              // A number, list or object already in the spec: edited as the JSON it is.
              <JsonValueEditor id={fieldId} value={current} onChange={(v) => setArg(f.name, v)} readOnly={locked} label={f.title} />
            ) : (
              <CodeEditor
                id={fieldId}
                value={typeof current === "string" ? current : ""}
                onChange={(text) => setArg(f.name, text === "" ? undefined : text)}
                language="template"
                names={names}
                readOnly={locked}
                placeholder={f.placeholder ?? argumentExample(f.name, names)}
                ariaLabel={f.title}
                ariaDescribedBy={f.help.length > 0 ? helpId : undefined}
                knownErrors={errors}
              />
            )}
            {f.structured && !locked && (
              // The value's type says which editor shows it; switching writes an empty value of the other kind.
              <Button variant="link" className="tool-arg__switch"
                onClick={() => setArg(f.name, typeof current === "string" || current === undefined || current === null ? (f.structured === "array" ? [] : {}) : undefined)}>
                {typeof current === "string" || current === undefined || current === null
                  ? `Type ${f.structured === "array" ? "a list" : "an object"} as JSON instead`
                  : "Use a template instead"}
              </Button>
            )}
            {errors.length > 0 && (
              <ul className="field-errors">
                {errors.map((e, i) => (
                  <li key={i}>{e}</li>
                ))}
              </ul>
            )}
          </div>
        );
      })}
      {allowsExtraArguments(tool.schema) ? (
        <MapRows
          id={id}
          boxId={`${id}.__extra`}
          value={extras}
          onWrite={writeExtras}
          names={names}
          locked={locked}
          errorSchema={errorSchema}
          title="Other arguments"
          description={`${tool.name} also takes arguments not listed above.`}
          language="template"
          keyLabel="Argument"
          valueLabel="Value"
          keyPlaceholder="name"
          valuePlaceholder={examplePlaceholder("template", names)}
          addLabel="Add argument"
          taken={[...named]}
        />
      ) : (
        Object.keys(extras).length > 0 && (
          <div className="form-field tool-args__unknown" role="group" aria-label="Arguments the tool does not take">
            <p className="field-errors">
              {tool.schema.additionalProperties === false ? `${tool.name} does not take these arguments; remove them:` : `${tool.name} ignores these arguments:`}
            </p>
            {Object.entries(extras).map(([k, v]) => (
              <div className="tool-args__unknown-row" key={k} id={`${id}.${k}`} tabIndex={-1}>
                <code>{k}</code> <span className="muted">= {typeof v === "string" ? v : JSON.stringify(v)}</span>
                {!locked && (
                  <Button size="small" aria-label={`Remove ${k}`} onClick={() => setArg(k, undefined)}>
                    Remove
                  </Button>
                )}
              </div>
            ))}
          </div>
        )
      )}
    </fieldset>
  );
}
