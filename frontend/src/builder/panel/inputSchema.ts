// The run input's JSON Schema as a list of fields (name, type, required, description, default, allowed values) and back.

type Schema = Record<string, unknown>;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The types the visual editor offers, as JSON Schema ``type`` values, with their labels. */
export const FIELD_TYPES = [
  { value: "string", label: "Text" },
  { value: "number", label: "Number" },
  { value: "integer", label: "Whole number" },
  { value: "boolean", label: "Yes/no" },
  { value: "array", label: "List" },
  { value: "object", label: "Object" },
] as const;

export type FieldType = (typeof FIELD_TYPES)[number]["value"];

const TYPES = new Set<string>(FIELD_TYPES.map((t) => t.value));

/** Property keys the editor edits. */
const EDITED = new Set(["type", "description", "default", "enum"]);

/**
 * Property keys the editor does not edit but keeps as they are and lists under the field
 * ("Also: maxLength 500"): constraints and details that do not change what a field is.
 */
const KEPT = new Set([
  "title",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "items",
  "minItems",
  "maxItems",
  "uniqueItems",
  "properties",
  "required",
  "additionalProperties",
  "examples",
]);

/** Root keys that change which inputs are valid beyond the top-level properties: shown only as JSON. */
const ROOT_EDITED = new Set(["type", "properties", "required"]);
const ROOT_KEPT = new Set(["title", "description", "$schema", "additionalProperties", "examples"]);

/** One top-level property of the input schema. */
export interface InputField {
  name: string;
  type: FieldType;
  required: boolean;
  description: string;
  /** Absent: no default. */
  default?: unknown;
  /** Allowed values of a text field; absent or empty: any text. */
  enum?: string[];
  /** The property as it was (keys the editor keeps, in their order). */
  raw: Schema;
}

export type ReadResult = { ok: true; fields: InputField[] } | { ok: false; problems: string[] };

/**
 * The fields of ``schema``, or why the visual editor cannot show it. It can show an object
 * schema whose properties each have one of the six types and otherwise only keys it edits
 * or keeps (``KEPT``); anything else (``anyOf``, ``$ref``, a type list, an enum on a number,
 * ``patternProperties`` at the root...) is reported in ``problems`` so that nothing is
 * dropped by editing it visually.
 */
export function readInputSchema(schema: unknown): ReadResult {
  const problems: string[] = [];
  if (!isObject(schema)) return { ok: false, problems: ["The schema is not a JSON object."] };
  if (schema.type !== undefined && schema.type !== "object") problems.push(`The input is of type ${JSON.stringify(schema.type)}, not an object.`);
  for (const key of Object.keys(schema)) {
    if (!ROOT_EDITED.has(key) && !ROOT_KEPT.has(key)) problems.push(`“${key}” at the top level.`);
  }
  const props = schema.properties ?? {};
  if (!isObject(props)) return { ok: false, problems: [...problems, "“properties” is not an object."] };
  const required = schema.required ?? [];
  if (!Array.isArray(required) || required.some((r) => typeof r !== "string")) problems.push("“required” is not a list of names.");
  const requiredSet = new Set(Array.isArray(required) ? required.map(String) : []);
  for (const name of requiredSet) if (!(name in props)) problems.push(`“${name}” is required but not a property.`);
  const fields: InputField[] = [];
  for (const [name, raw] of Object.entries(props)) {
    if (!isObject(raw)) {
      problems.push(`${name}: not an object schema.`);
      continue;
    }
    const type = raw.type;
    if (typeof type !== "string" || !TYPES.has(type)) {
      problems.push(`${name}: ${type === undefined ? "no type" : `type ${JSON.stringify(type)}`}.`);
      continue;
    }
    const odd = Object.keys(raw).filter((k) => !EDITED.has(k) && !KEPT.has(k));
    if (odd.length > 0) problems.push(`${name}: ${odd.map((k) => `“${k}”`).join(", ")}.`);
    const field: InputField = { name, type: type as FieldType, required: requiredSet.has(name), description: typeof raw.description === "string" ? raw.description : "", raw };
    if (raw.description !== undefined && typeof raw.description !== "string") problems.push(`${name}: a description that is not text.`);
    if ("default" in raw) field.default = raw.default;
    if (raw.enum !== undefined) {
      if (type !== "string" || !Array.isArray(raw.enum) || raw.enum.some((v) => typeof v !== "string")) problems.push(`${name}: allowed values other than text.`);
      else field.enum = raw.enum as string[];
    }
    fields.push(field);
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, fields };
}

/** The property of one field: its kept keys in their order, the edited ones set or removed. */
function propertyOf(field: InputField): Schema {
  const out: Schema = { ...field.raw, type: field.type };
  if (field.description) out.description = field.description;
  else delete out.description;
  if (field.enum && field.enum.length > 0 && field.type === "string") out.enum = field.enum;
  else delete out.enum;
  if (field.default !== undefined) out.default = field.default;
  else delete out.default;
  return out;
}

/**
 * ``schema`` with its ``properties`` and ``required`` rewritten from ``fields`` (other root
 * keys kept). ``required`` is left out when no field is required, ``type`` is "object".
 */
export function writeInputSchema(schema: Schema, fields: readonly InputField[]): Schema {
  const out: Schema = { ...schema, type: "object" };
  out.properties = Object.fromEntries(fields.map((f) => [f.name, propertyOf(f)]));
  const required = fields.filter((f) => f.required).map((f) => f.name);
  if (required.length > 0) out.required = required;
  else delete out.required;
  return out;
}

/** A field changed to ``type``: a default or allowed values of the old type no longer fit, so they go. */
export function withType(field: InputField, type: FieldType): InputField {
  if (type === field.type) return field;
  const { default: _d, enum: _e, ...rest } = field;
  void _d;
  void _e;
  return { ...rest, type };
}

/** The kept keys of a field as short text ("maxLength 500, format email"), or "" when none. */
export function keptSummary(field: InputField): string {
  return Object.entries(field.raw)
    .filter(([k]) => KEPT.has(k))
    .map(([k, v]) => `${k} ${typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : JSON.stringify(v)}`)
    .join(", ");
}

/** A name not used yet: ``field``, ``field_2``, ... */
export function freshFieldName(fields: readonly InputField[]): string {
  const used = new Set(fields.map((f) => f.name));
  if (!used.has("field")) return "field";
  let i = 2;
  while (used.has(`field_${i}`)) i++;
  return `field_${i}`;
}
