// The input schema as a list of fields: what the list can show, and writing it back without losing anything.
import { describe, expect, it } from "vitest";
import { readInputSchema, withType, writeInputSchema } from "./inputSchema";

const EXAMPLES = [
  { type: "object", required: ["topic"], properties: { topic: { type: "string", minLength: 3, maxLength: 500 } } },
  {
    type: "object",
    required: ["ticket"],
    properties: { ticket: { type: "object", required: ["subject"], properties: { subject: { type: "string", maxLength: 300 } } } },
  },
  { type: "object", required: ["order_id", "reason"], properties: { order_id: { type: "string", pattern: "^[A-Z]-[0-9]{4}$" }, reason: { type: "string" } } },
  { type: "object", properties: { level: { type: "string", enum: ["low", "high"], default: "low", description: "How urgent" }, n: { type: "integer", default: 3 } } },
  { type: "object" },
];

describe("readInputSchema / writeInputSchema", () => {
  it("round-trips the examples' schemas unchanged", () => {
    for (const schema of EXAMPLES) {
      const read = readInputSchema(schema);
      expect(read.ok).toBe(true);
      if (read.ok) expect(JSON.stringify(writeInputSchema(schema, read.fields))).toBe(JSON.stringify({ ...schema, ...(schema.properties ? {} : { properties: {} }) }));
    }
  });

  it("reads name, type, required, description, default and allowed values", () => {
    const read = readInputSchema(EXAMPLES[3]);
    if (!read.ok) throw new Error("not readable");
    expect(read.fields.map(({ raw: _r, ...f }) => f)).toEqual([
      { name: "level", type: "string", required: false, description: "How urgent", default: "low", enum: ["low", "high"] },
      { name: "n", type: "integer", required: false, description: "", default: 3 },
    ]);
  });

  it("says what it cannot show instead of dropping it", () => {
    const read = readInputSchema({
      type: "object",
      properties: { a: { anyOf: [{ type: "string" }, { type: "null" }] }, b: { type: ["string", "null"] }, c: { type: "integer", enum: [1, 2] }, d: { type: "string", const: "x" } },
      allOf: [{}],
    });
    expect(read.ok).toBe(false);
    if (!read.ok) expect(read.problems).toEqual(["“allOf” at the top level.", "a: no type.", 'b: type ["string","null"].', "c: allowed values other than text.", "d: “const”."]);
    expect(readInputSchema({ type: "array" }).ok).toBe(false);
  });

  it("writes required, enum and default; a type change drops a default that no longer fits", () => {
    const schema = { type: "object", title: "Input", properties: { topic: { type: "string", maxLength: 50 } } };
    const read = readInputSchema(schema);
    if (!read.ok) throw new Error("not readable");
    const [topic] = read.fields;
    const edited = { ...topic!, required: true, enum: ["a", "b"], default: "a", description: "Pick one" };
    expect(writeInputSchema(schema, [edited])).toEqual({
      type: "object",
      title: "Input",
      properties: { topic: { type: "string", maxLength: 50, description: "Pick one", enum: ["a", "b"], default: "a" } },
      required: ["topic"],
    });
    expect(writeInputSchema(schema, [withType(edited, "integer")]).properties).toEqual({ topic: { type: "integer", maxLength: 50, description: "Pick one" } });
  });
});
