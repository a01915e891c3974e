// Which config fields are expressions or templates, the names they may use, and schema tidying for forms.
import type { GraphSpec } from "../spec";

export type EditorLanguage = "expression" | "template";

/**
 * Fields the node kinds' pydantic configs (runs/nodes/*.py, approvals/nodes.py) evaluate as
 * expressions or render as templates. Their JSON Schemas do not mark them, so this is the one
 * place that says which; ``*`` matches any property name or array index. A schema that marks a
 * field itself (``"x-ballast-editor": "expression"`` or ``"format": "expression"|"template"``)
 * is honoured too, so a new kind can declare its own without a front-end change.
 */
export const FIELD_EDITORS: Readonly<Record<string, Readonly<Record<string, EditorLanguage>>>> = {
  condition: { expression: "expression", "cases.*.expression": "expression" },
  transform: { "set.*": "expression" },
  llm: { system: "template", prompt: "template" },
  agent: { system: "template", prompt: "template" },
  approval: { prompt: "template" },
  tool: { "args.*": "template" },
  subgraph: { "input.*": "template" },
};

/** Config fields that list state keys (edited as rows offering the graph's names). */
export const STATE_KEY_LISTS: Readonly<Record<string, readonly string[]>> = {
  end: ["output"],
};

/** Config fields naming users or groups (an approval's approvers): a type-ahead picker, stored as plain names. */
export const PRINCIPAL_LISTS: Readonly<Record<string, Readonly<Record<string, "user" | "group">>>> = {
  approval: { approvers: "user", approver_groups: "group" },
};

/** Config fields holding a tool's arguments (named fields from the picked tool's schema). */
export const TOOL_ARGUMENTS: Readonly<Record<string, string>> = {
  tool: "args",
  subgraph: "input",
};

/** A "Call graph" node's graph and version fields: pickers of published graphs and their versions. */
export const GRAPH_PICKERS: Readonly<Record<string, Readonly<Record<string, "graphPick" | "graphVersion">>>> = {
  subgraph: { graph: "graphPick", version: "graphVersion" },
};

/** An agent's graph tools: rows of a published graph, its version, a tool name and a description. */
export const GRAPH_TOOL_LISTS: Readonly<Record<string, string>> = {
  agent: "graph_tools",
};

type Schema = Record<string, unknown>;
type UiSchema = Record<string, unknown>;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The editor language of a field's own schema marker, if it has one. */
export function markedLanguage(schema: unknown): EditorLanguage | null {
  if (!isObject(schema)) return null;
  const mark = schema["x-ballast-editor"] ?? schema.format;
  return mark === "expression" || mark === "template" ? mark : null;
}

/**
 * ``anyOf: [X, {type: "null"}]`` (pydantic's ``X | None``) as X itself, keeping title,
 * description and default, everywhere in the schema (including ``$defs``). Forms then show
 * one input instead of a choice between "Option 1" and "Option 2"; an emptied input leaves
 * the key out, which is the same None. Returns a new schema; the input is not changed.
 */
export function simplifySchema<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map((s) => simplifySchema(s)) as T;
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) out[key] = simplifySchema(value);
  const variants = out.anyOf;
  if (Array.isArray(variants)) {
    const nonNull = variants.filter((v) => !(isObject(v) && v.type === "null"));
    if (nonNull.length === 1 && nonNull.length < variants.length && isObject(nonNull[0])) {
      const { anyOf: _dropped, ...rest } = out;
      void _dropped;
      const merged: Record<string, unknown> = { ...nonNull[0], ...rest };
      if (merged.default === null) delete merged.default;
      return merged as T;
    }
  }
  return out as T;
}

function setPath(ui: UiSchema, parts: string[], leaf: UiSchema): void {
  const [head, ...rest] = parts;
  if (head === undefined) return;
  // rjsf: ``items`` for array members, ``additionalProperties`` for a map's values.
  const key = head === "*" ? "__any__" : head;
  const child = (isObject(ui[key]) ? ui[key] : (ui[key] = {})) as UiSchema;
  if (rest.length === 0) Object.assign(child, leaf);
  else setPath(child, rest, leaf);
}

function resolveRef(root: Schema, schema: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/")) return schema;
  let target: unknown = root;
  for (const part of ref.slice(2).split("/")) target = isObject(target) ? target[part] : undefined;
  return isObject(target) ? { ...target, ...schema } : schema;
}

/** Rewrite ``__any__`` placeholders into ``items``/``additionalProperties`` by the schema's shape. */
function placeWildcards(ui: UiSchema, schema: Schema, root: Schema): UiSchema {
  const out: UiSchema = {};
  const resolved = resolveRef(root, schema);
  for (const [key, value] of Object.entries(ui)) {
    if (!isObject(value) || key.startsWith("ui:")) {
      out[key] = value;
      continue;
    }
    if (key === "__any__") {
      const itemSchema = resolved.type === "array" ? resolved.items : resolved.additionalProperties;
      const placed = placeWildcards(value, isObject(itemSchema) ? itemSchema : {}, root);
      out[resolved.type === "array" ? "items" : "additionalProperties"] = placed;
      continue;
    }
    const props = isObject(resolved.properties) ? resolved.properties : {};
    const childSchema = isObject(props[key]) ? (props[key] as Schema) : {};
    out[key] = placeWildcards(value, childSchema, root);
  }
  return out;
}

function collectMarks(schema: unknown, root: Schema, path: string[], found: Record<string, EditorLanguage>, depth = 0): void {
  if (!isObject(schema) || depth > 8) return;
  const resolved = resolveRef(root, schema);
  const lang = markedLanguage(resolved);
  if (lang && path.length > 0) found[path.join(".")] = lang;
  if (isObject(resolved.properties)) {
    for (const [k, v] of Object.entries(resolved.properties)) collectMarks(v, root, [...path, k], found, depth + 1);
  }
  if (isObject(resolved.items)) collectMarks(resolved.items, root, [...path, "*"], found, depth + 1);
  if (isObject(resolved.additionalProperties)) collectMarks(resolved.additionalProperties, root, [...path, "*"], found, depth + 1);
}

/** ``{path: language}`` of every expression/template field of ``kind`` (mapping plus schema marks). */
export function editorFields(kind: string, schema: Schema): Record<string, EditorLanguage> {
  const found: Record<string, EditorLanguage> = { ...(FIELD_EDITORS[kind] ?? {}) };
  collectMarks(schema, schema, [], found);
  return found;
}

/** Free-form JSON values (``dict[str, Any]`` without properties, e.g. ``options``, ``output_schema``). */
function jsonFields(schema: Schema, skip: Set<string>): string[] {
  const props = isObject(schema.properties) ? schema.properties : {};
  return Object.entries(props)
    .filter(([name, s]) => {
      if (skip.has(name) || !isObject(s)) return false;
      return s.type === "object" && !isObject(s.properties) && s.additionalProperties !== false && !isObject(s.additionalProperties);
    })
    .map(([name]) => name);
}

/**
 * The rjsf uiSchema of a kind's config form: code editor widgets on expression and template
 * fields, a JSON editor on free-form objects, and field order as the schema declares it.
 */
export function configUiSchema(kind: string, rawSchema: Schema): UiSchema {
  const schema = simplifySchema(rawSchema);
  const ui: UiSchema = {};
  const fields = editorFields(kind, schema);
  for (const [path, lang] of Object.entries(fields)) setPath(ui, path.split("."), { "ui:widget": lang });
  const topLevel = new Set(Object.keys(fields).map((p) => p.split(".")[0] ?? ""));
  for (const name of jsonFields(schema, topLevel)) ui[name] = { "ui:field": "json" };
  const placed = placeWildcards(ui, schema, schema);
  // A map of expressions (a transform's set) is edited as rows: State key | Expression.
  for (const name of expressionMaps(schema, fields)) placed[name] = { "ui:field": "expressionMap" };
  for (const name of STATE_KEY_LISTS[kind] ?? []) placed[name] = { ...(isObject(placed[name]) ? placed[name] : {}), "ui:field": "stateKeyList" };
  const args = TOOL_ARGUMENTS[kind];
  if (args) placed[args] = { "ui:field": "toolArgs" };
  for (const [name, field] of Object.entries(GRAPH_PICKERS[kind] ?? {})) placed[name] = { "ui:field": field };
  const graphTools = GRAPH_TOOL_LISTS[kind];
  if (graphTools) placed[graphTools] = { "ui:field": "graphTools" };
  for (const [name, principal] of Object.entries(PRINCIPAL_LISTS[kind] ?? {})) placed[name] = { "ui:field": "principals", "ui:options": { principal } };
  return placed;
}

/** Top-level ``{key: expression}`` maps: an object of strings whose every value is an expression (``set.*``). */
function expressionMaps(schema: Schema, fields: Record<string, EditorLanguage>): string[] {
  const props = isObject(schema.properties) ? schema.properties : {};
  return Object.entries(props)
    .filter(([name, s]) => {
      if (fields[`${name}.*`] !== "expression" || !isObject(s)) return false;
      const values = s.additionalProperties;
      return s.type === "object" && !isObject(s.properties) && isObject(values) && values.type === "string";
    })
    .map(([name]) => name);
}

/**
 * Names an expression or template of this graph may use, sorted: declared state keys, the
 * input schema's top-level properties, keys nodes write (``output_key`` or its default in the
 * kind's schema from ``catalogue``, a transform's ``set``)
 * and ``input`` (the run input). Completions offer them; the server check is told them.
 */
export function stateKeyNames(spec: GraphSpec, catalogue: readonly { kind: string; config_schema: Record<string, unknown> }[] = []): string[] {
  const names = new Set<string>(["input"]);
  for (const key of Object.keys(spec.state ?? {})) names.add(key);
  const props = spec.input_schema?.properties;
  if (isObject(props)) for (const key of Object.keys(props)) names.add(key);
  for (const node of spec.nodes) {
    // A node that leaves output_key out writes its kind's default key (llm: "reply").
    const kindProps = catalogue.find((k) => k.kind === node.kind)?.config_schema.properties;
    const fallback = isObject(kindProps) && isObject(kindProps.output_key) ? kindProps.output_key.default : undefined;
    const config: Record<string, unknown> = node.config ?? {};
    const out = config.output_key ?? fallback;
    if (typeof out === "string" && out) names.add(out);
    if (node.kind === "transform" && isObject(config.set)) for (const key of Object.keys(config.set)) names.add(key);
  }
  return [...names].sort();
}

/** What a state key holds, where the graph says: examples in empty fields use it. */
export type ValueKind = "number" | "text" | "list" | "object" | "boolean";

const SCHEMA_KINDS: Readonly<Record<string, ValueKind>> = { string: "text", number: "number", integer: "number", array: "list", object: "object", boolean: "boolean" };

function kindOfValue(value: unknown): ValueKind | undefined {
  if (typeof value === "number") return "number";
  if (typeof value === "string") return "text";
  if (typeof value === "boolean") return "boolean";
  if (Array.isArray(value)) return "list";
  if (isObject(value)) return "object";
  return undefined;
}

/**
 * The kind of value of the state keys whose kind the graph says: a declared key's reducer or
 * default (append: a list, add: a number), else an input property's type, else an LLM's or
 * agent's reply (text; an object with an output schema). Keys nothing says anything about
 * are left out.
 */
export function stateKeyKinds(spec: GraphSpec, catalogue: readonly { kind: string; config_schema: Record<string, unknown> }[] = []): Record<string, ValueKind> {
  const out: Record<string, ValueKind> = {};
  for (const node of spec.nodes) {
    if (node.kind !== "llm" && node.kind !== "agent") continue;
    const config: Record<string, unknown> = node.config ?? {};
    const kindProps = catalogue.find((k) => k.kind === node.kind)?.config_schema.properties;
    const fallback = isObject(kindProps) && isObject(kindProps.output_key) ? kindProps.output_key.default : undefined;
    const key = config.output_key ?? fallback;
    if (typeof key === "string" && key) out[key] = isObject(config.output_schema) ? "object" : "text";
  }
  const props = spec.input_schema?.properties;
  if (isObject(props)) {
    for (const [key, s] of Object.entries(props)) {
      const kind = isObject(s) && typeof s.type === "string" ? SCHEMA_KINDS[s.type] : undefined;
      if (kind) out[key] = kind;
    }
  }
  for (const [key, s] of Object.entries(spec.state ?? {})) {
    const reducer = s.reducer ?? "replace";
    const kind =
      reducer === "append" || reducer === "extend" ? "list" : reducer === "add" || reducer === "max" || reducer === "min" ? "number" : reducer === "merge" ? "object" : kindOfValue(s.default);
    if (kind) out[key] = kind;
  }
  return out;
}
