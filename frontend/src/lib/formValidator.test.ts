import type { RJSFSchema } from "@rjsf/utils";
import { describe, expect, it } from "vitest";
import { validator } from "./formValidator";

// The error schema's fields as these tests read them (rjsf types them by the form's data type).
type Fields = Record<string, { __errors?: string[]; city?: { __errors?: string[] }; addError?: (message: string) => void } | undefined>;

const schema: RJSFSchema = {
  type: "object",
  required: ["name", "count"],
  additionalProperties: false,
  properties: {
    name: { type: "string", title: "Customer name", minLength: 2 },
    count: { type: "integer", minimum: 1 },
    tags: { type: "array", items: { type: "string" } },
    mode: { enum: ["fast", "slow"] },
    address: { $ref: "#/$defs/address" },
  },
  $defs: { address: { type: "object", required: ["city"], properties: { city: { type: "string" } } } },
};

describe("the no-eval form validator", () => {
  it("words errors as ajv did and puts them on their fields", () => {
    const { errors, errorSchema } = validator.validateFormData({ count: 0, tags: [3], mode: "x", extra: 1, address: {} }, schema);
    const byProperty = Object.fromEntries(errors.map((e) => [e.property, e.message]));
    expect(byProperty).toEqual({
      ".name": "must have required property 'Customer name'",
      ".count": "must be >= 1",
      ".tags.0": "must be string",
      ".mode": "must be equal to one of the allowed values",
      "": "must NOT have additional properties",
      ".address.city": "must have required property 'city'",
    });
    const fields = errorSchema as unknown as Fields;
    expect(fields.count?.__errors).toEqual(["must be >= 1"]);
    expect(fields.address?.city?.__errors).toEqual(["must have required property 'city'"]);
  });

  it("passes valid data and reports a too-short string", () => {
    expect(validator.validateFormData({ name: "Ada", count: 2, address: { city: "Paris" } }, schema).errors).toEqual([]);
    const [error] = validator.validateFormData({ name: "A", count: 2 }, schema).errors;
    expect([error?.property, error?.message, error?.stack]).toEqual([".name", "must NOT have fewer than 2 characters", "'Customer name' must NOT have fewer than 2 characters"]);
  });

  it("checks a sub-schema whose $ref points into the root schema", () => {
    const sub = { $ref: "#/$defs/address" } as RJSFSchema;
    expect(validator.isValid(sub, { city: "Oslo" }, schema)).toBe(true);
    expect(validator.isValid(sub, {}, schema)).toBe(false);
  });

  it("runs customValidate and transformErrors as rjsf's ajv validator does", () => {
    const result = validator.validateFormData(
      { name: "Ada", count: 0 },
      schema,
      (data, errors) => {
        if ((data as { name?: string }).name === "Ada") (errors as unknown as Fields).name?.addError?.("taken");
        return errors;
      },
      (errors) => errors.map((e) => ({ ...e, message: e.message?.toUpperCase() })),
    );
    expect((result.errorSchema as unknown as Fields).name?.__errors).toEqual(["taken"]);
    expect(result.errors.map((e) => e.message)).toContain("MUST BE >= 1");
  });
});
