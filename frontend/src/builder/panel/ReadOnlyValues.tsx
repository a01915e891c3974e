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

/**
 * One value as text: a string as itself (code text when it spans lines), a map of strings
 * (a transform's ``set``: key -> expression) as a nested list of code, anything else as JSON.
 * Strings are never JSON-quoted: an expression reads as the user wrote it.
 */
function ValueText({ value }: { value: unknown }) {
  if (typeof value === "string" && value !== "") {
    return value.includes("\n") ? <pre>{value}</pre> : <code className="readonly-code">{value}</code>;
  }
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length > 0 && entries.every(([, v]) => typeof v === "string")) {
      return (
        <dl className="readonly-map">
          {entries.map(([k, v]) => (
            <div key={k} className="readonly-map-row">
              <dt>
                <code>{k}</code>
              </dt>
              <dd>
                <ValueText value={v} />
              </dd>
            </div>
          ))}
        </dl>
      );
    }
  }
  const text = displayValue(value);
  return typeof value === "string" || value === undefined || value === null ? <>{text}</> : <pre>{text}</pre>;
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
        return (
          <div key={name} className="readonly-row" id={idPrefix ? `${idPrefix}.${name}` : undefined} tabIndex={-1}>
            <dt title={typeof s.description === "string" ? s.description : undefined}>{typeof s.title === "string" ? s.title : name}</dt>
            <dd>
              <ValueText value={v} />
            </dd>
          </div>
        );
      })}
    </dl>
  );
}
