// The side panel for one selected node: its config form (from the kind's JSON Schema), policies, errors, cost, test.
import type { NodeKindInfo, ValidationIssue } from "../../api/types";
import type { UiSchema } from "@rjsf/utils";
import { useEffect, useMemo } from "react";
import { configUiSchema, GRAPH_TOOL_LISTS, simplifySchema, stateKeyKinds, stateKeyNames, TOOL_ARGUMENTS } from "../editors/fields";
import type { ToolArgsContext } from "../editors/formContext";
import { useCallee } from "./graphCalls";
import { costsSomething } from "../flow";
import type { NodeSpec, RetryPolicy } from "../spec";
import { updateNode } from "../spec";
import { useBuilder } from "../store";
import { formatCost } from "../../shell/format";
import { CHOICE_FIELDS, optionsFor, useChoices } from "./choices";
import { CodeAssistContext, type CodeAssist } from "../editors/assist";
import { NodeLastData } from "./NodeLastData";
import { NodePin } from "./NodePin";
import { initialTestState, NodeTest } from "./NodeTest";
import { useTestData } from "./useTestData";
import { pickerVariables } from "./variables";
import { changedPath, errorSchemaFor, fieldDomId, jsonEqual } from "./paths";
import { ReadOnlyValues } from "./ReadOnlyValues";
import { SchemaForm } from "./SchemaForm";
import { Button } from "../../shell/Button";

/** The node's own fields (not its kind's config) as one form; repeat_safe as a three-way choice. */
export const NODE_SETTINGS_SCHEMA = {
  type: "object",
  properties: {
    label: { type: "string", title: "Label", description: "Shown on the canvas instead of the id; the id stays the same." },
    timeout_seconds: {
      type: "number",
      title: "Timeout (seconds)",
      exclusiveMinimum: 0,
      maximum: 86400,
      description: "Wall-clock limit of one attempt. Empty: no limit.",
    },
    max_iterations: {
      type: "integer",
      title: "Max iterations",
      minimum: 1,
      maximum: 10000,
      description: "How many times this node may run in one run. Every loop needs it on one of its nodes.",
    },
    repeat_safe: {
      type: "string",
      title: "Safe to repeat",
      // A default, so that the select offers exactly these three (no blank option meaning the same as the first).
      default: "default",
      oneOf: [
        { const: "default", title: "As the kind says" },
        { const: "yes", title: "Yes: run it again after a crash" },
        { const: "no", title: "No: park the run for a person after a crash" },
      ],
      description: "What happens when a crash interrupted this step.",
    },
    retry: {
      type: "object",
      title: "Retry",
      description: "When and how a failed step is tried again.",
      properties: {
        max_attempts: { type: "integer", title: "Attempts", minimum: 1, maximum: 100, description: "Every attempt counts: 1 = no retry." },
        backoff_seconds: { type: "number", title: "First delay (seconds)", minimum: 0, maximum: 3600 },
        backoff_multiplier: { type: "number", title: "Delay multiplier", minimum: 1, maximum: 10, description: "Each later delay is the previous one times this." },
        max_backoff_seconds: { type: "number", title: "Longest delay (seconds)", minimum: 0, maximum: 86400 },
        retry_on: {
          type: "array",
          title: "Retry on error codes",
          items: { type: "string" },
          description: "Empty: every error the node marks retryable.",
        },
      },
    },
  },
} as const;

const NODE_SETTINGS_UI: UiSchema = {
  "ui:order": ["label", "timeout_seconds", "max_iterations", "repeat_safe", "retry"],
  label: { "ui:placeholder": "(the node id)" },
  timeout_seconds: { "ui:placeholder": "no limit" },
  max_iterations: { "ui:placeholder": "no limit" },
  retry: {
    max_attempts: { "ui:placeholder": "default: 1" },
    backoff_seconds: { "ui:placeholder": "default: 1" },
    backoff_multiplier: { "ui:placeholder": "default: 2" },
    max_backoff_seconds: { "ui:placeholder": "default: 300" },
  },
};

type NodeSettingsValue = {
  label?: string;
  timeout_seconds?: number;
  max_iterations?: number;
  repeat_safe: "default" | "yes" | "no";
  retry?: RetryPolicy;
};

function settingsOf(node: NodeSpec): NodeSettingsValue {
  const value: NodeSettingsValue = { repeat_safe: node.repeat_safe === true ? "yes" : node.repeat_safe === false ? "no" : "default" };
  if (node.label) value.label = node.label;
  if (node.timeout_seconds !== null && node.timeout_seconds !== undefined) value.timeout_seconds = node.timeout_seconds;
  if (node.max_iterations !== null && node.max_iterations !== undefined) value.max_iterations = node.max_iterations;
  if (node.retry) value.retry = node.retry;
  return value;
}

function nodePatch(value: NodeSettingsValue): Partial<NodeSpec> {
  const retry = value.retry && Object.values(value.retry).some((v) => v !== undefined) ? value.retry : undefined;
  return {
    label: value.label || undefined,
    timeout_seconds: value.timeout_seconds ?? undefined,
    max_iterations: value.max_iterations ?? undefined,
    repeat_safe: value.repeat_safe === "yes" ? true : value.repeat_safe === "no" ? false : undefined,
    retry,
  };
}

function isUnset(value: unknown): boolean {
  return value === null || value === undefined;
}

/**
 * The node settings this kind uses, from the catalogue: no repeat_safe where the kind does not
 * use it (validation refuses it), no timeout or retry where the step does no work (start, end,
 * join: ``does_work``), no max_iterations where the node cannot be on a loop (``can_loop``).
 * A value already set stays, so that it can be cleared. Returns the settings form's schema.
 */
export function settingsSchemaFor(kind: NodeKindInfo | undefined, node: NodeSpec): Record<string, unknown> {
  const drop = new Set<string>();
  if (kind?.uses_repeat_safe === false && isUnset(node.repeat_safe)) drop.add("repeat_safe");
  if (kind?.does_work === false && isUnset(node.timeout_seconds)) drop.add("timeout_seconds");
  if (kind?.does_work === false && isUnset(node.retry)) drop.add("retry");
  if (kind?.can_loop === false && isUnset(node.max_iterations)) drop.add("max_iterations");
  const properties = Object.fromEntries(Object.entries(NODE_SETTINGS_SCHEMA.properties).filter(([k]) => !drop.has(k)));
  return { ...NODE_SETTINGS_SCHEMA, properties };
}

/** The kind's config schema for a form: ``X | None`` collapsed, the root's title and docstring left to the panel header. */
function formSchema(raw: Record<string, unknown> | undefined): Record<string, unknown> {
  const { title: _t, description: _d, ...rest } = simplifySchema(raw ?? { type: "object" });
  void _t;
  void _d;
  return rest;
}

const EMPTY_CONFIG: Record<string, unknown> = {};

/** ``choice`` widgets (a datalist of tools, providers or models) on the kind's CHOICE_FIELDS. */
function withChoiceWidgets(kind: string, ui: UiSchema): UiSchema {
  const out: UiSchema = { ...ui };
  for (const [path, which] of Object.entries(CHOICE_FIELDS[kind] ?? {})) {
    const [field, star] = path.split(".");
    if (!field) continue;
    const widget = { "ui:widget": "choice", "ui:options": { choices: which } };
    const own = (out[field] ?? {}) as UiSchema;
    out[field] = star === "*" ? { ...own, items: { ...((own.items as UiSchema | undefined) ?? {}), ...widget } } : { ...own, ...widget };
  }
  return out;
}

interface Props {
  node: NodeSpec;
  graphId: number | null;
}

/** Everything about one node. Edits go through ``change()`` with one coalesce key per field. */
export function NodePanel({ node, graphId }: Props) {
  const b = useBuilder();
  const kind = b.catalogue.find((k) => k.kind === node.kind);
  const schema = useMemo(() => formSchema(kind?.config_schema), [kind]);
  const choices = useChoices();
  const uiSchema = useMemo(() => withChoiceWidgets(node.kind, configUiSchema(node.kind, schema)), [node.kind, schema]);
  const names = useMemo(() => stateKeyNames(b.spec, b.catalogue), [b.spec, b.catalogue]);
  const kinds = useMemo(() => stateKeyKinds(b.spec, b.catalogue), [b.spec, b.catalogue]);
  const issues = useMemo<ValidationIssue[]>(
    () => (b.validation?.errors ?? []).filter((e) => e.node === node.id),
    [b.validation, node.id],
  );
  const configErrors = useMemo(() => errorSchemaFor(issues, "config"), [issues]);
  const settingsErrors = useMemo(() => errorSchemaFor(issues, "", ["config"]), [issues]);
  const settings = useMemo(() => settingsOf(node), [node]);
  const settingsSchema = useMemo(() => settingsSchemaFor(kind, node), [kind, node]);
  const onlyLabel = Object.keys(settingsSchema.properties as object).length === 1;
  const figure = b.validation?.estimate?.nodes[node.id];
  const estimate = costsSomething(figure) ? figure : undefined;
  const field = b.selection.field;
  // A spec may leave an empty config out (the CLI and API accept that).
  const config = node.config ?? EMPTY_CONFIG;
  const options = useMemo(() => {
    const out: Record<string, { value: string; label: string }[]> = {};
    for (const which of new Set(Object.values(CHOICE_FIELDS[node.kind] ?? {}))) out[which] = optionsFor(which, choices, config);
    return out;
  }, [node.kind, choices, config]);

  // Test data (pinned, else the last input): what Test node starts from, previews resolve
  // against, and where the picker finds the fields of earlier nodes' outputs.
  const testData = useTestData(graphId, node.id);
  const variables = useMemo(() => pickerVariables(b.spec, node.id, b.catalogue, testData.state), [b.spec, node.id, b.catalogue, testData.state]);
  const assist = useMemo<CodeAssist | null>(
    () => (graphId === null || b.readOnly ? null : { graphId, state: testData.state, stateLabel: testData.label, variables }),
    [graphId, b.readOnly, testData.state, testData.label, variables],
  );
  const testable = !b.readOnly && graphId !== null && kind?.does_work !== false;

  // A tool node's picked tool, once the catalogue knows it: its arguments become named fields.
  const pickedTool = TOOL_ARGUMENTS[node.kind] && typeof config.tool === "string" ? config.tool : null;
  const toolInfo = pickedTool ? choices.tools.find((t) => t.name === pickedTool) : undefined;
  // A "Call graph" node: the published graphs to pick, and the picked version's input fields.
  // An agent: the same published graphs, offered as its graph tools.
  const callee = useCallee(node.kind === "subgraph" || node.kind in GRAPH_TOOL_LISTS, graphId, config.graph, config.version);
  const tool = useMemo<ToolArgsContext | null>(() => {
    if (callee && node.kind === "subgraph") return callee.picked && callee.schema ? { name: callee.picked.name, schema: simplifySchema(callee.schema), of: "graph" } : null;
    return toolInfo?.args_schema ? { name: toolInfo.name, schema: simplifySchema(toolInfo.args_schema) } : null;
  }, [toolInfo, callee, node.kind]);

  // The error list (or a click on a node's error badge) asks for a field: focus and show it.
  useEffect(() => {
    if (!field) return;
    const el = document.getElementById(fieldDomId(field));
    if (!el) return;
    el.scrollIntoView?.({ block: "center", behavior: "smooth" });
    el.focus({ preventScroll: true });
  }, [field, node.id]);

  function focusField(f: string | null) {
    b.select({ field: f });
  }

  function onConfig(next: Record<string, unknown>) {
    if (jsonEqual(next, config)) return;
    const path = changedPath(config, next);
    b.change((spec) => updateNode(spec, node.id, { config: next }), `node:${node.id}:config${path}`);
  }

  function onSettings(next: Record<string, unknown>) {
    const value = next as NodeSettingsValue;
    if (jsonEqual(value, settings)) return;
    const path = changedPath(settings, value);
    b.change((spec) => updateNode(spec, node.id, nodePatch(value)), `node:${node.id}:settings${path}`);
  }

  const unplaced = issues.filter((i) => !configErrors.placed.includes(i) && !settingsErrors.placed.includes(i));
  return (
    <div className="node-panel" aria-label={`Node ${node.label || node.id}`}>
      <header className="panel-header">
        <h2>{node.label || node.id}</h2>
        <p className="panel-subtitle">
          {kind ? kind.title : node.kind} · <code>{node.id}</code>
        </p>
        {kind?.description && <p className="field-help">{kind.description}</p>}
      </header>

      {/* Test node first, and the node's last input and output right under it: n8n and Dify show
          both beside the form, not at the end of a long panel. */}
      {testable ? (
        <NodeTest key={node.id} graphId={graphId} node={node} spec={b.spec} catalogue={b.catalogue} pinned={testData.pinned ? testData.state : undefined}>
          <NodeLastData graphId={graphId} nodeId={node.id} />
        </NodeTest>
      ) : (
        <NodeLastData graphId={graphId} nodeId={node.id} />
      )}
      {testable && graphId !== null && (
        <NodePin graphId={graphId} nodeId={node.id} data={testData} blank={initialTestState(b.spec, node.id, b.catalogue)} />
      )}

      {issues.length > 0 && (
        <section className="panel-section panel-issues" aria-label="Problems">
          <h3>
            {issues.length} problem{issues.length === 1 ? "" : "s"}
          </h3>
          <ul>
            {issues.map((issue, i) => (
              <li key={i}>
                {issue.field ? (
                  <Button variant="link" onClick={() => focusField(issue.field)}>
                    {issue.field.replace(/^config\./, "")}: {issue.message}
                  </Button>
                ) : (
                  issue.message
                )}
              </li>
            ))}
          </ul>
          {unplaced.length > 0 && unplaced.length < issues.length && <p className="field-help">Problems not tied to one field are listed here only.</p>}
        </section>
      )}

      {estimate && (
        <p className="panel-estimate" title="The pre-run estimate of one run of this node (worst case within its limits).">
          Estimated cost per run: <strong>{formatCost(estimate)}</strong>
        </p>
      )}

      <section className="panel-section" aria-label="Configuration">
        <h3>Configuration</h3>
        {!kind && <p className="panel-error">Unknown node kind “{node.kind}”: its settings cannot be shown as a form.</p>}
        {b.readOnly ? (
          <ReadOnlyValues schema={schema} value={config} idPrefix="config" />
        ) : Object.keys((schema.properties as object | undefined) ?? {}).length === 0 ? (
          <p className="panel-empty">This kind has no settings.</p>
        ) : (
          <CodeAssistContext.Provider value={assist}>
          <SchemaForm
            key={node.id}
            label="Configuration"
            schema={schema}
            uiSchema={uiSchema}
            value={config}
            onChange={onConfig}
            errors={configErrors.schema}
            idPrefix="config"
            names={names}
            options={options}
            tool={tool}
            callee={callee}
            kinds={kinds}
          />
          </CodeAssistContext.Provider>
        )}
      </section>

      <section className="panel-section" aria-label="Node policies">
        <h3>{onlyLabel ? "Label" : "Policies"}</h3>
        {b.readOnly ? (
          <ReadOnlyValues schema={settingsSchema} value={settings as Record<string, unknown>} idPrefix="node" />
        ) : (
          <SchemaForm
            key={node.id}
            label="Node policies"
            schema={settingsSchema}
            uiSchema={NODE_SETTINGS_UI}
            value={settings as Record<string, unknown>}
            onChange={onSettings}
            errors={settingsErrors.schema}
            idPrefix="node"
          />
        )}
      </section>

    </div>
  );
}
