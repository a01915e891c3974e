// What the variable picker offers at a node: input fields, state keys and earlier nodes' outputs (with their fields from test data), and how each is written.

import type { GraphSpec } from "../spec";
import { upstreamNodes, writtenKeys } from "./NodeTest";

type KindSchemas = readonly { kind: string; config_schema: Record<string, unknown> }[];

/** One name the picker offers. ``path`` is how an expression reads it (``order.total``). */
export interface PickerVariable {
  path: string;
  /** The heading it is listed under ("Run input", "State", "From <node>", "Test data"). */
  group: string;
  /** A short sample of its value in the test data, or what it is. */
  detail: string;
}

/**
 * THE rule for naming run input (both help texts and the picker follow it): every field the
 * input schema declares is a state key from the run's start, so it is read by its name
 * (``topic`` in an expression, ``{{ topic }}`` in a template), like any other state key.
 * ``input.topic`` is the run input exactly as given: use it only for a key the input
 * schema does not declare, or to read the original after a node has overwritten ``topic``.
 */
export const INPUT_RULE =
  "Read input fields by name, like any state key: topic in expressions, {{ topic }} in templates. " +
  "input.topic is the run input as given: only for keys the input schema does not declare.";

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** ``base`` followed by ``key`` as an expression writes it: ``base.key``, or ``base["key"]`` for a key that is no identifier. */
export function childPath(base: string, key: string): string {
  return IDENT.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A value in at most ``max`` characters for the picker's detail column. */
export function sample(value: unknown, max = 40): string {
  if (value === undefined) return "";
  const text = typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * The variables node ``nodeId`` can read, in the order the picker lists them: the input
 * schema's fields (by name), declared state keys, then each earlier node's output keys
 * (``writtenKeys``), each key followed by its fields one level down where ``data`` (the
 * node's pinned data or last input) holds an object there; then other keys ``data`` holds;
 * last, ``input.<key>`` for run-input keys the schema does not declare. Each path once.
 */
export function pickerVariables(spec: GraphSpec, nodeId: string, catalogue: KindSchemas = [], data?: Record<string, unknown>): PickerVariable[] {
  const out: PickerVariable[] = [];
  const seen = new Set<string>(["input"]);
  const add = (path: string, group: string, fallback: string, value: unknown, withFields = true) => {
    if (seen.has(path)) return;
    seen.add(path);
    out.push({ path, group, detail: value === undefined ? fallback : sample(value) });
    if (withFields && isObject(value)) {
      for (const [k, v] of Object.entries(value).slice(0, 30)) add(childPath(path, k), group, "", v, false);
    }
  };
  const declared = spec.input_schema?.properties;
  const props = isObject(declared) ? (declared as Record<string, { type?: unknown }>) : {};
  for (const [key, s] of Object.entries(props)) add(key, "Run input", typeof s?.type === "string" ? s.type : "input field", data?.[key]);
  for (const key of Object.keys(spec.state ?? {})) add(key, "State", "state key", data?.[key]);
  for (const id of upstreamNodes(spec, nodeId)) {
    const upstream = spec.nodes.find((n) => n.id === id);
    if (!upstream) continue;
    for (const [key] of writtenKeys(upstream, catalogue)) add(key, `From ${upstream.label || upstream.id}`, "its output", data?.[key]);
  }
  for (const [key, value] of Object.entries(data ?? {})) if (IDENT.test(key)) add(key, "Test data", "", value);
  const runInput = data?.input;
  if (isObject(runInput)) for (const [key, value] of Object.entries(runInput)) if (!(key in props)) add(childPath("input", key), "Run input (undeclared)", "", value, false);
  return out;
}

/** The text to insert for ``path``: the path itself in an expression, ``{{ path }}`` in a template. */
export function insertionFor(language: "expression" | "template", path: string): string {
  return language === "template" ? `{{ ${path} }}` : path;
}
