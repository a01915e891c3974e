// Which config fields get expression/template/JSON editors, schema tidying, and the names offered.
import { describe, expect, it } from "vitest";
import { KINDS } from "../../test/fixtures/nodeKinds";
import { sampleSpec } from "../panel/testing";
import { configUiSchema, editorFields, simplifySchema, stateKeyNames } from "./fields";
import { toolNameFor } from "./GraphToolsField";

const schemaOf = (kind: string) => KINDS.find((k) => k.kind === kind)!.config_schema;

describe("editor fields", () => {
  it("puts expression editors on condition expressions, including each case's", () => {
    const ui = configUiSchema("condition", schemaOf("condition"));
    expect(ui).toMatchObject({ expression: { "ui:widget": "expression" }, cases: { items: { expression: { "ui:widget": "expression" } } } });
  });

  it("puts expression editors on a transform's values and templates on prompts and tool args", () => {
    // A transform's set is rows of State key | Expression (each an expression editor), an end's output a list of keys.
    expect(configUiSchema("transform", schemaOf("transform"))).toEqual({ set: { "ui:field": "expressionMap" } });
    expect(configUiSchema("end", schemaOf("end"))).toEqual({ output: { "ui:field": "stateKeyList" } });
    expect(configUiSchema("llm", schemaOf("llm"))).toMatchObject({ prompt: { "ui:widget": "template" }, system: { "ui:widget": "template" } });
    // A tool's args are named template fields from the picked tool's schema (ToolArgsField).
    expect(configUiSchema("tool", schemaOf("tool"))).toMatchObject({ args: { "ui:field": "toolArgs" } });
    // Free-form objects get the JSON editor.
    expect(configUiSchema("llm", schemaOf("llm"))).toMatchObject({ options: { "ui:field": "json" } });
  });

  it("edits an agent's graph tools as rows of published graphs", () => {
    expect(configUiSchema("agent", schemaOf("agent"))).toMatchObject({ graph_tools: { "ui:field": "graphTools" } });
    // The tool name filled in from a picked graph's name fits the providers' alphabet.
    expect(toolNameFor("Order lookup (EU)")).toBe("Order_lookup_EU");
    expect(toolNameFor("???")).toBe("graph_tool");
  });

  it("honours a field's own schema mark", () => {
    const schema = { type: "object", properties: { when: { type: "string", "x-ballast-editor": "expression" }, body: { type: "string", format: "template" } } };
    expect(editorFields("plugin", schema)).toEqual({ when: "expression", body: "template" });
  });

  it("collapses `X | None` into X", () => {
    const s = simplifySchema(schemaOf("condition")) as { properties: Record<string, Record<string, unknown>> };
    expect(s.properties.expression).toEqual({ type: "string", title: "Expression", description: "Two-way condition: takes the handle 'true' or 'false'." });
    expect(s.properties.cases).toMatchObject({ type: "array", minItems: 1, items: { $ref: "#/$defs/Case" } });
  });

  it("names state keys, input properties, keys nodes write and input", () => {
    expect(stateKeyNames(sampleSpec())).toEqual(["input", "notes", "priority", "score", "ticket"]);
    // With the catalogue, an llm node without output_key writes its default "reply".
    expect(stateKeyNames(sampleSpec(), KINDS)).toEqual(["input", "notes", "priority", "reply", "score", "ticket"]);
  });
});

describe("labels from the server's catalogue", () => {
  // Sentence case: a capital first letter only (acronyms such as API and JSON stay as they are).
  const ACRONYMS = new Set(["API", "JSON"]);
  const sentenceCase = (text: string) => text.split(" ").slice(1).every((w) => ACRONYMS.has(w) || w === w.toLowerCase() || /^\(/.test(w));

  it("gives every config field of every kind a title in sentence case and a description", () => {
    for (const kind of KINDS) {
      const props = (simplifySchema(kind.config_schema) as { properties?: Record<string, { title?: string; description?: string }> }).properties ?? {};
      for (const [name, prop] of Object.entries(props)) {
        expect(prop.title, `${kind.kind}.${name}`).toBeTruthy();
        expect(sentenceCase(prop.title!), `${kind.kind}.${name}: "${prop.title}"`).toBe(true);
        expect(prop.description, `${kind.kind}.${name}`).toBeTruthy();
        expect(prop.description, `${kind.kind}.${name}`).not.toMatch(/\bNone\b/);
      }
    }
  });

  it("labels the API key field in words", () => {
    const llm = KINDS.find((k) => k.kind === "llm")!.config_schema as { properties: Record<string, { title?: string }> };
    expect(llm.properties.api_key_env?.title).toBe("API key environment variable");
  });
});
