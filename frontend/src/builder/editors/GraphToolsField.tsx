// An agent's ``graph_tools``: published graphs offered to the model as tools, one row each (graph, version, tool name, description).
import type { ErrorSchema, FieldProps } from "@rjsf/utils";
import { Button } from "../../shell/Button";
import type { CallableGraph, EditorFormContext } from "./formContext";

/** One graph tool as the spec stores it (runs.nodes.agent.GraphTool). */
export interface GraphToolValue {
  graph?: number;
  version?: number | "latest";
  name?: string;
  description?: string;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A tool name the providers accept (``^[A-Za-z0-9_-]{1,64}$``) made from a graph's name. */
export function toolNameFor(graphName: string): string {
  const name = graphName.replace(/[^A-Za-z0-9_-]+/g, "_").replace(/^_+|_+$/g, "").slice(0, 64);
  return name || "graph_tool";
}

function errorsAt(schema: ErrorSchema | undefined, index: number, key: string): string[] {
  const row = isObject(schema) ? (schema as Record<string, unknown>)[String(index)] : undefined;
  const at = isObject(row) ? row[key] : undefined;
  return isObject(at) && Array.isArray(at.__errors) ? at.__errors.map(String) : [];
}

function FieldErrors({ messages }: { messages: string[] }) {
  if (messages.length === 0) return null;
  return (
    <ul className="error-detail">
      {messages.map((m) => (
        <li key={m} className="text-danger">{m}</li>
      ))}
    </ul>
  );
}

/**
 * ``ui:field: "graphTools"``: one row per graph tool with a picker of the published graphs
 * (``formContext.callee.graphs``), "latest" or one of the picked graph's versions, the name
 * the model calls it by (filled from the graph's name when picked) and an optional
 * description. Inputs carry the field paths as ids (``config.graph_tools.0.graph``), so a
 * validation error focuses its input.
 */
export function GraphToolsField(props: FieldProps) {
  const { fieldPathId, formData, onChange, readonly, disabled, schema, name, registry, errorSchema } = props;
  const id = fieldPathId.$id;
  const graphs: readonly CallableGraph[] = (registry.formContext as EditorFormContext | undefined)?.callee?.graphs ?? [];
  const rows: GraphToolValue[] = Array.isArray(formData) ? formData.filter(isObject).map((r) => r as GraphToolValue) : [];
  const locked = Boolean(readonly || disabled);
  const set = (next: GraphToolValue[]) => onChange((next.length ? next : undefined) as never, fieldPathId.path, undefined, id);
  const update = (index: number, patch: GraphToolValue) => set(rows.map((r, i) => (i === index ? { ...r, ...patch } : r)));
  const pick = (index: number, graphId: number | undefined) => {
    const row = rows[index] ?? {};
    const picked = graphs.find((g) => g.id === graphId);
    const named = row.name && rows.some((r, i) => i !== index && r.name === row.name) ? undefined : row.name;
    update(index, { graph: graphId, version: "latest", name: named || (picked ? toolNameFor(picked.name) : row.name) });
  };
  return (
    <div className="form-field form-field-graph-tools" role="group" aria-labelledby={`${id}__title`}>
      <span className="form-field-title" id={`${id}__title`}>{String(schema.title ?? name)}</span>
      <p className="field-help">{graphs.length === 0 ? "No other graph is published yet: publish a graph to offer it as a tool." : schema.description}</p>
      {rows.map((row, index) => {
        const picked = graphs.find((g) => g.id === row.graph);
        const known = row.graph === undefined || picked !== undefined;
        const version = row.version === undefined ? "latest" : String(row.version);
        const numbers = picked ? Array.from({ length: picked.latest }, (_, i) => picked.latest - i) : [];
        if (version !== "latest" && !numbers.includes(Number(version))) numbers.push(Number(version));
        const rowId = `${id}.${index}`;
        return (
          <fieldset key={index} className="graph-tool-row" data-graph-tool={index}>
            <legend className="small">Graph tool {index + 1}</legend>
            <label htmlFor={`${rowId}.graph`}>Graph</label>
            <select id={`${rowId}.graph`} className="form-control" value={row.graph === undefined ? "" : String(row.graph)} disabled={locked}
              onChange={(e) => pick(index, e.target.value === "" ? undefined : Number(e.target.value))}>
              <option value="">Pick a published graph…</option>
              {graphs.map((g) => <option key={g.id} value={String(g.id)}>{g.name} (v{g.latest})</option>)}
              {!known && <option value={String(row.graph)}>graph {row.graph}</option>}
            </select>
            <FieldErrors messages={errorsAt(errorSchema, index, "graph")} />
            <label htmlFor={`${rowId}.version`}>Version</label>
            <select id={`${rowId}.version`} className="form-control" value={version} disabled={locked}
              onChange={(e) => update(index, { version: e.target.value === "latest" ? "latest" : Number(e.target.value) })}>
              <option value="latest">Latest published when called{picked ? ` (now v${picked.latest})` : ""}</option>
              {numbers.map((n) => <option key={n} value={String(n)}>v{n}</option>)}
            </select>
            <FieldErrors messages={errorsAt(errorSchema, index, "version")} />
            <label htmlFor={`${rowId}.name`}>Tool name</label>
            <input id={`${rowId}.name`} className="form-control" value={row.name ?? ""} disabled={locked} placeholder="e.g. check_order"
              onChange={(e) => update(index, { name: e.target.value })} />
            <FieldErrors messages={errorsAt(errorSchema, index, "name")} />
            <label htmlFor={`${rowId}.description`}>Description <span className="muted small">(optional: the graph's own by default)</span></label>
            <input id={`${rowId}.description`} className="form-control" value={row.description ?? ""} disabled={locked}
              onChange={(e) => update(index, { description: e.target.value || undefined })} />
            {!locked && (
              <Button variant="danger-ghost" size="small" onClick={() => set(rows.filter((_, i) => i !== index))} aria-label={`Remove graph tool ${index + 1}`}>
                Remove
              </Button>
            )}
          </fieldset>
        );
      })}
      {!locked && (
        <Button id={`${id}.add`} size="small" onClick={() => set([...rows, { version: "latest" }])}>
          Add graph tool
        </Button>
      )}
    </div>
  );
}
