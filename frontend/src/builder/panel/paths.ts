// Field paths of validation errors (``config.cases[0].expression``) as rjsf error schemas, ids and undo keys.
import type { ValidationIssue } from "../../api/types";
import type { ErrorSchema } from "@rjsf/utils";

/** ``config.cases[0].expression`` -> ``["config", "cases", "0", "expression"]``. */
export function pathParts(path: string): string[] {
  return path
    .replace(/\[(\d+)\]/g, ".$1")
    .split(".")
    .filter((p) => p !== "");
}

/** The DOM id of a node-relative field: the forms use the path itself (idSeparator "."). */
export function fieldDomId(field: string): string {
  const parts = pathParts(field);
  return parts[0] === "config" ? parts.join(".") : ["node", ...parts].join(".");
}

/**
 * Issues whose field starts with ``prefix`` (``"config"``; ``""`` = the node's own fields) as
 * an rjsf error schema relative to that prefix. Issues without a field, or for the prefix
 * itself, are returned in ``rest`` (shown above the form).
 */
export function errorSchemaFor(issues: readonly ValidationIssue[], prefix: string, exclude: readonly string[] = []): { schema: ErrorSchema; placed: ValidationIssue[] } {
  const schema: Record<string, unknown> = {};
  const placed: ValidationIssue[] = [];
  const prefixParts = prefix ? pathParts(prefix) : [];
  for (const issue of issues) {
    if (!issue.field) continue;
    const parts = pathParts(issue.field);
    if (prefixParts.some((p, i) => parts[i] !== p)) continue;
    const rel = parts.slice(prefixParts.length);
    if (rel.length === 0 || (rel[0] !== undefined && exclude.includes(rel[0]))) continue;
    let at = schema;
    for (const part of rel) at = (at[part] ??= {}) as Record<string, unknown>;
    ((at.__errors ??= []) as string[]).push(issue.message);
    placed.push(issue);
  }
  return { schema: schema as ErrorSchema, placed };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Equal as JSON (keys holding ``undefined`` count as absent). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The dotted path of what changed from ``a`` to ``b``: the deepest key both sides share where
 * exactly one child differs (``set.answer`` when one transform key was typed into). Typing in
 * one field therefore yields the same path every keystroke, which makes it one undo step.
 */
export function changedPath(a: unknown, b: unknown, prefix = ""): string {
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    const diffs = a.map((_, i) => i).filter((i) => !jsonEqual(a[i], b[i]));
    const only = diffs[0];
    if (diffs.length === 1 && only !== undefined) return changedPath(a[only], b[only], `${prefix}.${only}`);
    return prefix;
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    const diffs = [...keys].filter((k) => !jsonEqual(a[k], b[k]));
    const only = diffs[0];
    // A key that appears or disappears is its own step, named after the key.
    if (diffs.length === 1 && only !== undefined) {
      if (a[only] === undefined || b[only] === undefined) return `${prefix}.${only}`;
      return changedPath(a[only], b[only], `${prefix}.${only}`);
    }
  }
  return prefix;
}
