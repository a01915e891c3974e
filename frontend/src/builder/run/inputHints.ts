// Hints for a run's input form from the graph's input schema: a field's first example (or its
// default) as the placeholder, and its pattern or further examples as help, so the form says what
// a valid value looks like before the first submit refuses one.
import type { UiSchema } from "@rjsf/utils";

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function shown(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The hints of one field: ``ui:placeholder`` (e.g. A-1002), ``ui:help`` (its pattern, other examples); nested objects too. */
function fieldHints(schema: Record<string, unknown>): UiSchema {
  if (isObject(schema.properties)) return inputFormHints(schema);
  const ui: UiSchema = {};
  const examples = Array.isArray(schema.examples) ? schema.examples.filter((e) => e !== null && typeof e !== "object") : [];
  const scalar = ["string", "number", "integer"].includes(String(schema.type ?? ""));
  if (scalar && examples.length > 0) ui["ui:placeholder"] = `e.g. ${shown(examples[0])}`;
  else if (scalar && schema.default !== undefined && schema.default !== null) ui["ui:placeholder"] = `default: ${shown(schema.default)}`;
  const help: string[] = [];
  if (typeof schema.pattern === "string") help.push(`Must match ${schema.pattern}.`);
  if (examples.length > 1) help.push(`Examples: ${examples.map(shown).join(", ")}.`);
  if (help.length > 0) ui["ui:help"] = help.join(" ");
  return ui;
}

/** The uiSchema of a run's input form (``schema``: the input schema as a form schema): a hint per property that has one. */
export function inputFormHints(schema: Record<string, unknown>): UiSchema {
  const ui: UiSchema = {};
  const props = isObject(schema.properties) ? schema.properties : {};
  for (const [name, prop] of Object.entries(props)) {
    if (!isObject(prop)) continue;
    const hints = fieldHints(prop);
    if (Object.keys(hints).length > 0) ui[name] = hints;
  }
  return ui;
}
