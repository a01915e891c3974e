// rjsf widgets and fields backed by CodeEditor: expression and template strings, free-form JSON values.
import type { FieldProps, RegistryFieldsType, RegistryWidgetsType, WidgetProps } from "@rjsf/utils";
import { CodeEditor, type CodeLanguage } from "./CodeEditor";
import { examplePlaceholder, type EditorFormContext } from "./formContext";
import { JsonValueEditor } from "./JsonValueEditor";
import { PrincipalsField } from "./PrincipalsField";
import { ExpressionMapField, StateKeyListField } from "./RowFields";
import { ToolArgsField } from "./ToolArgsField";
import { GraphPickField, GraphVersionField } from "./GraphPickField";
import { GraphToolsField } from "./GraphToolsField";

function namesOf(props: { registry: { formContext?: unknown } }): readonly string[] {
  const ctx = props.registry.formContext as EditorFormContext | undefined;
  return ctx?.names ?? [];
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
export const editorFieldComponents: RegistryFieldsType = { json: JsonField, expressionMap: ExpressionMapField, stateKeyList: StateKeyListField, toolArgs: ToolArgsField, principals: PrincipalsField, graphPick: GraphPickField, graphVersion: GraphVersionField, graphTools: GraphToolsField };
