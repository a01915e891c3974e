// Values of a form shown as text (read-only mode: no inputs), labelled from the JSON Schema.
import { displayValue } from "./format";

type Schema = Record<string, unknown>;

interface Props {
  schema: Schema;
  value: Record<string, unknown>;
  /** The whole schema, to resolve ``$ref``s. */
  root?: Schema;
  idPrefix?: string;
}

function resolve(root: Schema, schema: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/")) return schema;
  let at: unknown = root;
  for (const part of ref.slice(2).split("/")) at = at && typeof at === "object" ? (at as Schema)[part] : undefined;
  return at && typeof at === "object" ? { ...(at as Schema), ...schema } : schema;
}

/** A definition list of the schema's properties (then any extra keys), values as text or JSON. */
export function ReadOnlyValues({ schema, value, root = schema, idPrefix }: Props) {
  const props = (schema.properties ?? {}) as Record<string, Schema>;
  const names = [...Object.keys(props), ...Object.keys(value).filter((k) => !(k in props))];
  const shown = names.filter((n) => value[n] !== undefined || props[n]?.default !== undefined);
  if (shown.length === 0) return <p className="panel-empty">No settings.</p>;
  return (
    <dl className="readonly-values">
      {shown.map((name) => {
        const s = props[name] ? resolve(root, props[name]) : {};
        const v = value[name] !== undefined ? value[name] : s.default;
        const text = displayValue(v);
        return (
          <div key={name} className="readonly-row" id={idPrefix ? `${idPrefix}.${name}` : undefined} tabIndex={-1}>
            <dt title={typeof s.description === "string" ? s.description : undefined}>{typeof s.title === "string" ? s.title : name}</dt>
            <dd>{text.includes("\n") || typeof v !== "string" ? <pre>{text}</pre> : text}</dd>
          </div>
        );
      })}
    </dl>
  );
}
