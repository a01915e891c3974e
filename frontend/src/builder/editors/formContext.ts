// What the config form hands its widgets and fields (rjsf formContext), and the examples empty code fields show.
import type { CodeLanguage } from "./CodeEditor";
import type { ValueKind } from "./fields";

/** The picked tool as the config form sees it (``formContext.tool``). */
export interface ToolArgsContext {
  name: string;
  /** The tool's argument JSON Schema (GET /api/v1/tools/ ``args_schema``), ``X | None`` collapsed. */
  schema: Record<string, unknown>;
  /** "graph": the fields are a called graph's input (a "Call graph" node), worded so. */
  of?: "tool" | "graph";
}

/** A graph a "Call graph" node may call: its id, name and newest published version. */
export interface CallableGraph {
  id: number;
  name: string;
  latest: number;
}

/** A "Call graph" (subgraph) node's choices (``ui:field: "graphPick"`` and ``"graphVersion"``). */
export interface CalleeContext {
  /** Published graphs it may pick (not the graph being edited). */
  graphs: readonly CallableGraph[];
  /** The picked graph, once the list knows it. */
  picked: CallableGraph | null;
  /** The input JSON Schema of the version it runs (null until loaded). */
  schema: Record<string, unknown> | null;
}

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
  /** A "Call graph" node's graphs, versions and the callee's input schema. */
  callee?: CalleeContext | null;
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
