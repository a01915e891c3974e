// One rjsf form over a JSON Schema, wired for the builder: code editor widgets, errors, no submit button.
import Form from "@rjsf/core";
import { englishStringTranslator, TranslatableString, type ErrorSchema, type RJSFSchema, type UiSchema } from "@rjsf/utils";
import { validator } from "../../lib/formValidator";
import { useMemo } from "react";
import type { EditorFormContext } from "../editors/formContext";
import { editorFieldComponents, editorWidgets } from "../editors/widgets";

const NO_NAMES: readonly string[] = [];
const NO_DEFAULTS = { emptyObjectFields: "skipDefaults", arrayMinItems: { populate: "never" } } as const;

/**
 * rjsf's strings, in our words: a new map entry (a transform's ``set`` -> Add) starts empty,
 * not as "New Value" (an invalid expression, flagged at once), and its key is labelled "Key",
 * not "newKey Key".
 */
export function translateString(id: TranslatableString, params?: string[]): string {
  if (id === TranslatableString.NewStringDefault) return "";
  if (id === TranslatableString.KeyLabel) return "Key";
  return englishStringTranslator(id, params);
}

/** ``ui:placeholder`` "default: X" on top-level fields with a default (unless one is set already). */
export function withDefaultPlaceholders(schema: Record<string, unknown>, ui: UiSchema): UiSchema {
  const props = (schema.properties ?? {}) as Record<string, { default?: unknown; type?: unknown }>;
  const out: UiSchema = { ...ui };
  for (const [name, s] of Object.entries(props)) {
    if (s.default === undefined || s.default === null || typeof s.default === "object") continue;
    const own = (out[name] ?? {}) as UiSchema;
    if (own["ui:placeholder"] === undefined) out[name] = { ...own, "ui:placeholder": `default: ${String(s.default)}` };
  }
  return out;
}

export interface SchemaFormProps {
  schema: Record<string, unknown>;
  uiSchema?: UiSchema;
  value: Record<string, unknown>;
  onChange(next: Record<string, unknown>): void;
  /** Server errors on fields (rjsf error schema relative to this form). */
  errors?: ErrorSchema;
  /** Field ids are ``idPrefix`` + ``.`` + the path (``config.cases.0.expression``). */
  idPrefix: string;
  names?: readonly string[];
  /** Options of ``choice`` widgets by name (tools, providers, models). */
  options?: EditorFormContext["options"];
  /** A tool node's picked tool (its arguments' fields). */
  tool?: EditorFormContext["tool"];
  /** A "Call graph" node's graphs, versions and callee input schema. */
  callee?: EditorFormContext["callee"];
  /** What state keys hold (examples in empty code fields). */
  kinds?: EditorFormContext["kinds"];
  readOnly?: boolean;
  /** Accessible name of the form. */
  label: string;
}

/**
 * Validates against the schema when a field loses focus (``liveValidate="onBlur"``), never on
 * every keystroke (rjsf lags on large forms, see UI.md); the server's errors come in ``errors``.
 */
export function SchemaForm({ schema, uiSchema, value, onChange, errors, idPrefix, names = NO_NAMES, options, tool, callee, kinds, readOnly, label }: SchemaFormProps) {
  const formContext = useMemo<EditorFormContext>(() => ({ names, options, tool, callee, kinds }), [names, options, tool, callee, kinds]);
  const ui = useMemo<UiSchema>(() => withDefaultPlaceholders(schema, { ...uiSchema, "ui:submitButtonOptions": { norender: true } }), [schema, uiSchema]);
  return (
    <Form
      schema={schema as RJSFSchema}
      uiSchema={ui}
      formData={value}
      validator={validator}
      widgets={editorWidgets}
      fields={editorFieldComponents}
      translateString={translateString}
      formContext={formContext}
      extraErrors={errors}
      idPrefix={idPrefix}
      idSeparator="."
      // Defaults are shown as placeholders, never written: opening a node must not change the graph.
      experimental_defaultFormStateBehavior={NO_DEFAULTS}
      liveValidate="onBlur"
      showErrorList={false}
      noHtml5Validate
      readonly={readOnly}
      aria-label={label}
      className="schema-form"
      onChange={(event) => onChange((event.formData ?? {}) as Record<string, unknown>)}
    />
  );
}
