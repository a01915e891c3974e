// rjsf's validator over @cfworker/json-schema, which interprets schemas: no eval, so the CSP keeps script-src 'self' (builder and approval forms).
import { Validator, type OutputUnit, type Schema } from "@cfworker/json-schema";
import {
  createErrorHandler,
  getDefaultFormState,
  toErrorSchema,
  unwrapErrorHandler,
  validationDataMerge,
  type CustomValidator,
  type ErrorTransformer,
  type RJSFSchema,
  type RJSFValidationError,
  type UiSchema,
  type ValidationData,
  type ValidatorType,
} from "@rjsf/utils";

/**
 * rjsf's ajv validator compiles every schema with ``new Function()``, which a Content-Security-Policy
 * without 'unsafe-eval' refuses; @cfworker/json-schema walks the schema instead. Its errors are
 * reworded as ajv words them ("must have required property 'name'", "must be string"), the texts
 * rjsf's forms have always shown, and placed on the field they are about.
 */

// Units that only say "a part below failed": the part's own unit says what is wrong.
const WRAPPERS = new Set(["properties", "patternProperties", "items", "prefixItems", "additionalItems", "$ref", "$recursiveRef",
  "allOf", "dependentSchemas", "if", "then", "else", "unevaluatedItems", "contains", "propertyNames"]);

/** The value at a JSON pointer (``#/properties/a/type``) in ``root``; undefined if it is not there. */
function at(root: unknown, pointer: string): unknown {
  let node: unknown = root;
  for (const raw of pointer.replace(/^#\/?/, "").split("/").filter(Boolean)) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

function quoted(error: string): string {
  return /"([^"]*)"/.exec(error)?.[1] ?? "";
}

interface Reworded {
  message: string;
  params: Record<string, unknown>;
}

/** ajv's message and params for one cfworker unit (``limit``: the keyword's value in the schema). */
function reword(unit: OutputUnit, limit: unknown): Reworded {
  const n = String(limit);
  switch (unit.keyword) {
    case "required":
      return { message: `must have required property '${quoted(unit.error)}'`, params: { missingProperty: quoted(unit.error) } };
    case "type":
      return { message: `must be ${Array.isArray(limit) ? limit.join(",") : n}`, params: { type: limit } };
    case "minLength":
      return { message: `must NOT have fewer than ${n} characters`, params: { limit } };
    case "maxLength":
      return { message: `must NOT have more than ${n} characters`, params: { limit } };
    case "minItems":
      return { message: `must NOT have fewer than ${n} items`, params: { limit } };
    case "maxItems":
      return { message: `must NOT have more than ${n} items`, params: { limit } };
    case "minProperties":
      return { message: `must NOT have fewer than ${n} properties`, params: { limit } };
    case "maxProperties":
      return { message: `must NOT have more than ${n} properties`, params: { limit } };
    case "minimum":
      return { message: `must be >= ${n}`, params: { comparison: ">=", limit } };
    case "maximum":
      return { message: `must be <= ${n}`, params: { comparison: "<=", limit } };
    case "exclusiveMinimum":
      return { message: `must be > ${n}`, params: { comparison: ">", limit } };
    case "exclusiveMaximum":
      return { message: `must be < ${n}`, params: { comparison: "<", limit } };
    case "multipleOf":
      return { message: `must be multiple of ${n}`, params: { multipleOf: limit } };
    case "pattern":
      return { message: `must match pattern "${n}"`, params: { pattern: limit } };
    case "format":
      return { message: `must match format "${n}"`, params: { format: limit } };
    case "enum":
      return { message: "must be equal to one of the allowed values", params: { allowedValues: limit } };
    case "const":
      return { message: "must be equal to constant", params: { allowedValue: limit } };
    case "uniqueItems":
      return { message: "must NOT have duplicate items", params: {} };
    case "additionalProperties":
    case "unevaluatedProperties":
      return { message: "must NOT have additional properties", params: { additionalProperty: quoted(unit.error) } };
    case "anyOf":
      return { message: "must match a schema in anyOf", params: {} };
    case "oneOf":
      return { message: "must match exactly one schema in oneOf", params: {} };
    case "not":
      return { message: "must NOT be valid", params: {} };
    case "dependentRequired":
    case "dependencies":
      return { message: `must have property '${quoted(unit.error)}' when another property is present`, params: {} };
    case "false":
      return { message: "boolean schema is false", params: {} };
    default:
      return { message: unit.error, params: {} };
  }
}

/** ``#/a/0/b`` -> ``.a.0.b`` (rjsf's property path; "" for the root). */
function property(instanceLocation: string): string {
  return instanceLocation
    .replace(/^#/, "")
    .split("/")
    .filter(Boolean)
    .map((p) => "." + decodeURIComponent(p).replace(/~1/g, "/").replace(/~0/g, "~"))
    .join("");
}

/** The field's title (uiSchema's ``ui:title``, else the schema's ``title``) at rjsf property path ``path``. */
function titleOf(path: string, schema: RJSFSchema, uiSchema: UiSchema | undefined): string {
  const parts = path.split(".").filter(Boolean);
  let ui: unknown = uiSchema;
  let node: unknown = schema;
  for (const p of parts) {
    ui = ui && typeof ui === "object" ? (ui as Record<string, unknown>)[p] : undefined;
    const props = node && typeof node === "object" ? (node as { properties?: Record<string, unknown> }).properties : undefined;
    node = props?.[p];
  }
  const fromUi = ui && typeof ui === "object" ? (ui as Record<string, unknown>)["ui:title"] : undefined;
  if (typeof fromUi === "string") return fromUi;
  const fromSchema = node && typeof node === "object" ? (node as { title?: unknown }).title : undefined;
  return parts.length && typeof fromSchema === "string" ? fromSchema : "";
}

/** rjsf's errors of cfworker's units: wrapper units dropped, ajv's wording, a missing property's error on that property. */
export function toRjsfErrors(units: OutputUnit[], schema: RJSFSchema, uiSchema?: UiSchema): RJSFValidationError[] {
  const out: RJSFValidationError[] = [];
  units.forEach((unit, i) => {
    if (WRAPPERS.has(unit.keyword)) return;
    // additionalProperties: false reports the extra property twice; ajv reports it once, on the object.
    const previous = units[i - 1];
    if (unit.keyword === "false" && previous && /^(additional|unevaluated)Properties$/.test(previous.keyword)) return;
    const { message: base, params } = reword(unit, at(schema, unit.keywordLocation));
    let path = property(unit.instanceLocation);
    let message = base;
    let stack = `${path} ${message}`.trim();
    let title: string;
    const missing = typeof params.missingProperty === "string" ? params.missingProperty : undefined;
    if (missing !== undefined) {
      path = `${path}.${missing}`;
      title = titleOf(path, schema, uiSchema);
      if (title) message = message.replace(`'${missing}'`, `'${title}'`);
      stack = message;
    } else {
      title = titleOf(path, schema, uiSchema);
      if (title) stack = `'${title}' ${message}`;
    }
    out.push({ name: unit.keyword, property: path, message, params, stack, schemaPath: unit.keywordLocation, title });
  });
  return out;
}

/**
 * ``ValidatorType`` for rjsf's ``Form``: the same contract as ``@rjsf/validator-ajv8``'s default
 * export (validateFormData with customValidate and transformErrors, isValid against sub-schemas of
 * a root schema, rawValidation), without code generation.
 */
export class CfworkerValidator implements ValidatorType<unknown, RJSFSchema> {
  // One interpreter per schema object (rjsf hands the same objects again on every render).
  private cache = new WeakMap<object, { root: object | undefined; validator: Validator }>();

  private validator(schema: RJSFSchema, rootSchema?: RJSFSchema): Validator {
    const hit = this.cache.get(schema);
    if (hit && hit.root === rootSchema) return hit.validator;
    // A sub-schema's $ref points into the root schema's definitions: give it them.
    const full: Schema =
      rootSchema && rootSchema !== schema
        ? { ...(schema as Schema), definitions: rootSchema.definitions, $defs: (rootSchema as Schema).$defs }
        : (schema as Schema);
    // A copy: the interpreter annotates the schema objects it indexes, and these are React props.
    const validator = new Validator(structuredClone(full), "2020-12", false);
    this.cache.set(schema, { root: rootSchema, validator });
    return validator;
  }

  rawValidation<Result = OutputUnit>(schema: RJSFSchema, formData?: unknown): { errors?: Result[]; validationError?: Error } {
    try {
      const result = this.validator(schema).validate(formData);
      return { errors: result.valid ? undefined : (result.errors as Result[]) };
    } catch (err) {
      return { validationError: err instanceof Error ? err : new Error(String(err)) };
    }
  }

  validateFormData(
    formData: unknown,
    schema: RJSFSchema,
    customValidate?: CustomValidator<unknown, RJSFSchema>,
    transformErrors?: ErrorTransformer<unknown, RJSFSchema>,
    uiSchema?: UiSchema<unknown, RJSFSchema>,
  ): ValidationData<unknown> {
    const raw = this.rawValidation<OutputUnit>(schema, formData);
    let errors = toRjsfErrors(raw.errors ?? [], schema, uiSchema);
    if (raw.validationError) errors = [...errors, { stack: raw.validationError.message }];
    if (typeof transformErrors === "function") errors = transformErrors(errors, uiSchema);
    let errorSchema = toErrorSchema<unknown>(errors);
    if (raw.validationError) errorSchema = { ...errorSchema, $schema: { __errors: [raw.validationError.message] } } as typeof errorSchema;
    if (typeof customValidate !== "function") return { errors, errorSchema };
    // Custom validation sees the form data with its defaults, as rjsf's ajv validator gives it.
    const withDefaults = getDefaultFormState<unknown, RJSFSchema>(this, schema, formData, schema, true);
    const handler = customValidate(withDefaults, createErrorHandler<unknown>(withDefaults), uiSchema, errorSchema);
    return validationDataMerge<unknown>({ errors, errorSchema }, unwrapErrorHandler<unknown>(handler));
  }

  isValid(schema: RJSFSchema, formData: unknown, rootSchema: RJSFSchema): boolean {
    try {
      return this.validator(schema, rootSchema).validate(formData).valid;
    } catch {
      return false;
    }
  }
}

/** The validator every builder form shares. */
export const validator = new CfworkerValidator();
