// rjsf widgets and fields backed by CodeEditor: expression and template strings, free-form JSON values.
import type { FieldProps, RegistryFieldsType, RegistryWidgetsType, WidgetProps } from "@rjsf/utils";
import { useState } from "react";
import { CodeEditor, type CodeLanguage } from "./CodeEditor";
import { PrincipalsField } from "./PrincipalsField";
import { ExpressionMapField, StateKeyListField } from "./RowFields";
import type { ValueKind } from "./fields";
import { ToolArgsField, type ToolArgsContext } from "./ToolArgsField";

/** What the config form hands its widgets (rjsf ``formContext``). */
export interface EditorFormContext {
  /** Names expressions and templates may use (completions, and the server check's known keys). */
  names: readonly string[];
  /** Options for ``ui:widget: "choice"`` fields, by their ``ui:options.choices`` name. */
  options?: Readonly<Record<string, readonly { value: string; label: string }[]>>;
  /** What state keys hold, where the graph says (``stateKeyKinds``): examples in empty fields fit it. */
  kinds?: Readonly<Record<string, ValueKind>>;
  /** A tool node's picked tool and its argument schema (``ui:field: "toolArgs"``); null: none known. */
  tool?: ToolArgsContext | null;
}

function namesOf(props: { registry: { formContext?: unknown } }): readonly string[] {
  const ctx = props.registry.formContext as EditorFormContext | undefined;
  return ctx?.names ?? [];
}

/** An expression example for a key of each kind (a list is not compared with 0.5). */
const EXPRESSION_EXAMPLES: Readonly<Record<ValueKind, (key: string) => string>> = {
  number: (k) => `${k} > 0.5`,
  list: (k) => `len(${k}) > 0`,
  text: (k) => `"refund" in ${k}`,
  boolean: (k) => `${k} == True`,
  object: (k) => `${k} is not None`,
};
const EXAMPLE_ORDER: readonly ValueKind[] = ["number", "list", "text", "boolean", "object"];

/**
 * An example for an empty code field that uses a name the graph defines (a state key, else the
 * run input's ``input``), so copying it never yields "unknown variable". An expression example
 * fits what the key holds where ``kinds`` says (``stateKeyKinds``), preferring a number; a key
 * of unknown kind gets ``key is not None``, which holds for any value.
 */
export function examplePlaceholder(language: CodeLanguage, names: readonly string[], kinds: Readonly<Record<string, ValueKind>> = {}): string {
  const key = names.find((n) => n !== "input");
  if (language === "expression") {
    if (!key) return "e.g. input.score > 0.5";
    for (const kind of EXAMPLE_ORDER) {
      const named = names.find((n) => n !== "input" && kinds[n] === kind);
      if (named) return `e.g. ${EXPRESSION_EXAMPLES[kind](named)}`;
    }
    return `e.g. ${key} is not None`;
  }
  // The same kind of example as the prompt's help ("Summarise {{ text }}").
  return key ? `e.g. Summarise {{ ${key} }}` : "e.g. Summarise {{ input.text }}";
}

/** JSON text of a value for editing (two-space indent; empty for undefined). */
export function jsonText(value: unknown): string {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

// Plain function components without defaultProps (rjsf 6 + React 19 trap, see UI.md).
function makeCodeWidget(language: CodeLanguage) {
  function CodeWidget(props: WidgetProps) {
    const { id, value, onChange, onBlur, readonly, disabled, rawErrors, placeholder, label } = props;
    const describedBy = rawErrors && rawErrors.length > 0 ? `${id}__error` : undefined;
    if (value !== undefined && value !== null && typeof value !== "string") {
      // A non-string value in a map of templates (a tool argument that is a number or list).
      return <JsonValueEditor id={id} value={value} onChange={onChange} readOnly={readonly || disabled} label={label} />;
    }
    return (
      <CodeEditor
        id={id}
        value={typeof value === "string" ? value : ""}
        onChange={(text) => onChange(text === "" ? undefined : text)}
        onBlur={() => onBlur(id, value)}
        language={language}
        names={namesOf(props)}
        readOnly={Boolean(readonly || disabled)}
        placeholder={placeholder || examplePlaceholder(language, namesOf(props), (props.registry.formContext as EditorFormContext | undefined)?.kinds)}
        ariaLabel={label}
        ariaDescribedBy={describedBy}
        knownErrors={rawErrors}
      />
    );
  }
  CodeWidget.displayName = `${language}Widget`;
  return CodeWidget;
}

export const ExpressionWidget = makeCodeWidget("expression");
export const TemplateWidget = makeCodeWidget("template");

interface JsonValueEditorProps {
  id: string;
  value: unknown;
  onChange(value: unknown): void;
  readOnly?: boolean;
  label?: string;
}

/** Edit any JSON value as text; only text that parses is passed on (the editor marks the rest). */
export function JsonValueEditor({ id, value, onChange, readOnly, label }: JsonValueEditorProps) {
  const [text, setText] = useState(() => jsonText(value));
  const [shown, setShown] = useState(value);
  // An outside change (undo) replaces the text; our own valid edits already match it.
  if (!Object.is(shown, value)) {
    setShown(value);
    let same = false;
    try {
      same = JSON.stringify(JSON.parse(text)) === JSON.stringify(value);
    } catch {
      same = false;
    }
    if (!same) setText(jsonText(value));
  }
  return (
    <CodeEditor
      id={id}
      value={text}
      language="json"
      readOnly={readOnly}
      ariaLabel={label}
      onChange={(next) => {
        setText(next);
        if (next.trim() === "") {
          setShown(undefined);
          onChange(undefined);
          return;
        }
        try {
          const parsed: unknown = JSON.parse(next);
          setShown(parsed);
          onChange(parsed);
        } catch {
          // Keep the text; the editor's JSON lint says what is wrong.
        }
      }}
    />
  );
}

/** ``ui:field: "json"``: a free-form object (``options``, ``output_schema``) as a JSON editor. */
export function JsonField(props: FieldProps) {
  const { fieldPathId, formData, onChange, readonly, disabled, schema, name, required } = props;
  const id = fieldPathId.$id;
  const title = schema.title ?? name;
  return (
    <div className="form-field form-field-json">
      <label htmlFor={id}>
        {title}
        {required ? <span className="required"> *</span> : null}
      </label>
      {schema.description && <p className="field-help">{schema.description}</p>}
      <JsonValueEditor
        id={id}
        value={formData}
        onChange={(v) => onChange(v as never, fieldPathId.path, undefined, id)}
        readOnly={Boolean(readonly || disabled)}
        label={title}
      />
      {/* Its errors (rawErrors) are listed once, by rjsf's field template around this field. */}
    </div>
  );
}

/**
 * ``ui:widget: "choice"``: a text input offering known values (a datalist of tools, providers
 * or models) while still taking any value, since a catalogue may be incomplete or unavailable.
 */
export function ChoiceWidget(props: WidgetProps) {
  const { id, value, onChange, onBlur, onFocus, readonly, disabled, placeholder, options, rawErrors, required } = props;
  const ctx = props.registry.formContext as EditorFormContext | undefined;
  const which = typeof options.choices === "string" ? options.choices : "";
  const list = ctx?.options?.[which] ?? [];
  const listId = `${id}__choices`;
  const current = list.find((o) => o.value === value);
  return (
    <>
      <input
        id={id}
        className="form-control"
        list={list.length > 0 ? listId : undefined}
        value={typeof value === "string" ? value : ""}
        placeholder={placeholder}
        required={required}
        disabled={disabled}
        readOnly={readonly}
        autoComplete="off"
        aria-invalid={rawErrors && rawErrors.length > 0 ? true : undefined}
        onChange={(e) => onChange(e.target.value === "" ? undefined : e.target.value)}
        onBlur={(e) => onBlur(id, e.target.value)}
        onFocus={(e) => onFocus(id, e.target.value)}
      />
      {list.length > 0 && (
        <datalist id={listId}>
          {list.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
        </datalist>
      )}
      {current && current.label !== current.value && <span className="field-help">{current.label}</span>}
    </>
  );
}

export const editorWidgets: RegistryWidgetsType = { expression: ExpressionWidget, template: TemplateWidget, choice: ChoiceWidget };
export const editorFieldComponents: RegistryFieldsType = { json: JsonField, expressionMap: ExpressionMapField, stateKeyList: StateKeyListField, toolArgs: ToolArgsField, principals: PrincipalsField };
