// ``ui:field: "principals"``: a list of usernames or group names (an approval's approvers) edited with the type-ahead picker.
import type { FieldProps } from "@rjsf/utils";
import { PrincipalPicker, type PrincipalKind } from "../../shell/PrincipalPicker";

/** The list stays plain names in the spec; the picker offers only users or only groups (``ui:options.principal``). */
export function PrincipalsField(props: FieldProps) {
  const { fieldPathId, formData, onChange, readonly, disabled, schema, name, uiSchema } = props;
  const id = fieldPathId.$id;
  const title = schema.title ?? name;
  const kind: PrincipalKind = (uiSchema?.["ui:options"] as { principal?: PrincipalKind } | undefined)?.principal === "group" ? "group" : "user";
  const names = Array.isArray(formData) ? formData.filter((v): v is string => typeof v === "string") : [];
  const set = (next: string[]) => onChange((next.length ? next : undefined) as never, fieldPathId.path, undefined, id);
  return (
    <div className="form-field form-field-principals">
      <label htmlFor={id}>{title}</label>
      {schema.description && <p className="field-help">{schema.description}</p>}
      <PrincipalPicker
        id={id}
        label={String(title)}
        kinds={[kind]}
        users={kind === "user" ? names : []}
        groups={kind === "group" ? names : []}
        onChange={(users, groups) => set(kind === "user" ? users : groups)}
        readOnly={Boolean(readonly || disabled)}
      />
    </div>
  );
}
