// Graph operations the list pages share: create, duplicate, delete, import a file, export a download.
import type { GraphSummary, ImportResult } from "../api/types";
import { api, ApiError } from "../lib/api";

/**
 * A new graph's first draft: Start connected to End, as n8n and Dify open a new workflow with
 * its trigger, so the first node is added with the "+" on Start (which goes between the two)
 * and the draft is valid from the start.
 */
export function starterDraft(name: string, description = ""): Record<string, unknown> {
  return {
    version: 1, name, description,
    nodes: [
      { id: "start", kind: "start", config: {}, position: { x: 0, y: 0 } },
      { id: "end", kind: "end", config: {}, position: { x: 520, y: 0 } },
    ],
    edges: [{ source: "start", target: "end" }],
  };
}

/**
 * POST /graphs/ named ``name``, its draft ``draft`` (default: the starter, Start -> End; an
 * example's spec is renamed to ``name``); returns the new graph (ApiError 409 name_taken, 400 invalid).
 */
export function createGraph(name: string, description = "", draft?: Record<string, unknown>): Promise<GraphSummary> {
  const body = draft ? { ...draft, name, ...(description ? { description } : {}) } : starterDraft(name, description);
  return api<GraphSummary>("graphs/", { method: "POST", body: { name, description, draft: body } });
}

/** POST /graphs/<id>/duplicate/ ``{name}``: a new graph with a copy of the draft. */
export function duplicateGraph(id: number, name: string): Promise<GraphSummary> {
  return api<GraphSummary>(`graphs/${id}/duplicate/`, { method: "POST", body: { name } });
}

/** DELETE /graphs/<id>/ (ApiError 409 with the reason when runs are pinned to its versions). */
export function deleteGraph(id: number): Promise<void> {
  return api<void>(`graphs/${id}/`, { method: "DELETE" });
}

/** Where to go after an import: the builder on the draft, or on the imported version (read-only) when the draft was kept apart from it. */
export function importedUrl(r: ImportResult): string {
  return r.draft_kept ? `/graphs/${r.graph}/?version=${r.version}` : `/graphs/${r.graph}/`;
}

/** One sentence on what an import did, for a notice. */
export function importedText(r: ImportResult): string {
  const what = r.created ? `Imported “${r.name}” as version ${r.version}.` : `“${r.name}” is unchanged: version ${r.version} has the same content.`;
  return r.draft_kept ? `${what} Its draft has unpublished edits, so it was left as it was.` : what;
}

/** One problem with an imported file, by path in the document ("" for the whole file) and the node it concerns. */
export interface ImportProblem { path: string; message: string; node?: string }

/** Thrown by importGraphFile when the file is not a graph: every problem found, by path. */
export class ImportFailed extends Error {
  readonly problems: ImportProblem[];
  constructor(message: string, problems: ImportProblem[]) {
    super(message);
    this.name = "ImportFailed";
    this.problems = problems;
  }
}

/** The problems of a 400 from the import API: ``error.issues`` when the server sent them, else ``error.fields``. */
export function problemsOf(err: ApiError): ImportProblem[] {
  const issues = (err.body?.error as { issues?: unknown } | undefined)?.issues;
  if (Array.isArray(issues) && issues.length > 0) {
    return inDocumentOrder(issues.map((raw) => {
      // ``path`` (from the spec root, e.g. nodes[2].config.x) when the server gives it; else node id + field.
      const i = raw as { node_id?: string | null; field?: string; path?: string; message?: string };
      const path = i.path || [i.node_id ? `nodes.${i.node_id}` : "", i.field ?? ""].filter(Boolean).join(".");
      return i.node_id ? { path, message: i.message ?? "", node: i.node_id } : { path, message: i.message ?? "" };
    }));
  }
  return inDocumentOrder(Object.entries(err.fields).flatMap(([path, msgs]) => msgs.map((message) => ({ path, message }))));
}

/**
 * ``problems`` with each section's paths in document order (nodes[1] before nodes[3] before
 * nodes[10]), the sections (the path's first name: nodes, edges, settings...) in the order
 * the server first reported them: the validator reports by check, which read as nodes[3],
 * nodes[1], nodes[0]. Stable for problems on one path.
 */
export function inDocumentOrder(problems: ImportProblem[]): ImportProblem[] {
  const collator = new Intl.Collator("en", { numeric: true });
  const section = (path: string) => /^[^.[]*/.exec(path)?.[0] ?? "";
  const firstSeen = new Map<string, number>();
  problems.forEach((p, i) => { if (!firstSeen.has(section(p.path))) firstSeen.set(section(p.path), i); });
  return problems
    .map((p, i) => ({ p, i }))
    .sort((a, b) => firstSeen.get(section(a.p.path))! - firstSeen.get(section(b.p.path))! || collator.compare(a.p.path, b.p.path) || a.i - b.i)
    .map(({ p }) => p);
}

/** A file's text (FileReader: ``Blob.text`` is missing in some engines, jsdom among them). */
function readText(file: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error("The file could not be read."));
    reader.readAsText(file);
  });
}

/**
 * Read ``file`` as a graph spec and POST it to /graphs/import/ (saved and published).
 * Raises ImportFailed with the problems by path when the file is not JSON, not an
 * object, or the server's validation refuses it; other ApiErrors pass through.
 */
export async function importGraphFile(file: File): Promise<ImportResult> {
  const text = await readText(file);
  let spec: unknown;
  try {
    spec = JSON.parse(text);
  } catch (e) {
    throw new ImportFailed(`${file.name} is not valid JSON.`, [{ path: "", message: e instanceof Error ? e.message : String(e) }]);
  }
  if (spec === null || typeof spec !== "object" || Array.isArray(spec)) {
    throw new ImportFailed(`${file.name} is not a graph.`, [{ path: "", message: "The file must hold one JSON object (a graph spec)." }]);
  }
  try {
    return await api<ImportResult>("graphs/import/", { method: "POST", body: spec });
  } catch (e) {
    if (e instanceof ApiError && e.status === 400) throw new ImportFailed(`${file.name} was not imported: ${e.message}`, problemsOf(e));
    throw e;
  }
}

/** A file name for a graph's export: its name in lower case, runs of other characters as "-". */
export function exportFileName(name: string): string {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
  return `${slug || "graph"}.json`;
}

/** GET /graphs/<id>/export/ and save it as a download; returns the spec. */
export async function exportGraph(graph: { id: number; name: string }): Promise<unknown> {
  const spec = await api<unknown>(`graphs/${graph.id}/export/`);
  const blob = new Blob([JSON.stringify(spec, null, 2) + "\n"], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = exportFileName(graph.name);
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
  return spec;
}
