// /audit/: the audit log (admins): filters by actor, verb, object and day, the hash chain's verification, CSV/JSONL export.
import type { AuditEntry, AuditFacets, AuditReport, AuditVersion, CursorPage } from "../api/types";
import { useEffect, useState, type FormEvent } from "react";
import { API_ROOT } from "../lib/api";
import { formatDateTime } from "../shell/format";
import { graphUrl, runUrl } from "../shell/graphLinks";
import { EmptyState, ErrorMessage, PageHeader, Skeleton } from "../shell/ui";
import { pagePath, useApi } from "../shell/useApi";
import "./costs/costs.css";
import { Button, ButtonLink } from "../shell/Button";

/** "triage v3" (a node-test snapshot: "triage test snapshot"), as people know a version. */
export function versionLabel(v: AuditVersion): string {
  return v.is_test ? `${v.graph_name} test snapshot` : `${v.graph_name} v${v.number}`;
}

/**
 * What an entry's Object and Details cells show: a version by its graph and number (the id in
 * the link's title; the export keeps the entry as chained), the details without the version
 * id they name it by.
 */
export function auditCells(e: AuditEntry): { version: AuditVersion | null; objectIsVersion: boolean; details: string } {
  const version = e.version ?? null;
  const objectIsVersion = version !== null && e.object_type === "graphversion";
  const data = version && !objectIsVersion && "graph_version" in e.data
    ? Object.fromEntries(Object.entries(e.data).filter(([k]) => k !== "graph_version")) : e.data;
  return { version, objectIsVersion, details: Object.keys(data).length ? JSON.stringify(data) : "" };
}

/**
 * Where a version's link goes: a published version opens read-only in the builder; a
 * node-test snapshot is no version the builder can open (its number, 0, is no published
 * version), so its link opens the graph's builder, where nodes are tested (the entry's
 * Object cell links the test run itself).
 */
export function versionHref(v: AuditVersion): string {
  return v.is_test ? graphUrl(v.graph) : `${graphUrl(v.graph)}?version=${v.number}`;
}

/** A link to a version (versionHref), its id in the title. */
function VersionLink({ v }: { v: AuditVersion }) {
  const title = v.is_test ? `node-test snapshot (graph version id ${v.id}): opens the graph's builder` : `graph version id ${v.id}`;
  return <a href={versionHref(v)} title={title}>{versionLabel(v)}</a>;
}

export const AUDIT_FILTERS = ["actor", "actor_type", "action", "object_type", "object_id", "since", "until"] as const;
export type AuditFilters = Record<(typeof AUDIT_FILTERS)[number], string>;
const NO_FILTERS: AuditFilters = { actor: "", actor_type: "", action: "", object_type: "", object_id: "", since: "", until: "" };
const PAGE_SIZE = 50;

/** Filters from a search string (unknown keys ignored). */
export function auditFiltersFromSearch(search: string): AuditFilters {
  const params = new URLSearchParams(search);
  const out = { ...NO_FILTERS };
  for (const key of AUDIT_FILTERS) out[key] = params.get(key) ?? "";
  return out;
}

/** The query string of the filters that are set (without "?"). */
export function auditQuery(f: AuditFilters, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams();
  for (const key of AUDIT_FILTERS) if (f[key].trim()) params.set(key, f[key].trim());
  for (const [k, v] of Object.entries(extra)) params.set(k, v);
  return params.toString();
}

/** The page of an object an entry names, when the app has one. */
function objectLink(e: AuditEntry): string | null {
  const id = Number(e.object_id);
  if (!Number.isInteger(id) || id <= 0) return null;
  if (e.object_type === "run") return runUrl(id);
  if (e.object_type === "graph") return graphUrl(id);
  return null;
}

function Verification({ onlyScope }: { onlyScope: string }) {
  const { data, error, loading, reload } = useApi<AuditReport>(`audit/verify/${onlyScope ? `?scope=${encodeURIComponent(onlyScope)}` : ""}`);
  if (error) return <ErrorMessage error={error} title="The chain could not be verified." onRetry={reload} />;
  if (!data) return <section className="card"><Skeleton lines={2} label="Verifying the audit chain…" /></section>;
  const ok = data.ok;
  return (
    <section className={`card verify ${ok ? "verify-ok" : "verify-bad"}`} aria-labelledby="audit-verify" aria-live="polite">
      <span className="verify-icon" aria-hidden="true">{ok ? "✓" : "!"}</span>
      <div className="verify-body">
        <h2 id="audit-verify">{ok ? "Audit chain intact" : `Audit chain broken: ${data.problems.length} problem${data.problems.length === 1 ? "" : "s"}`}</h2>
        <div className="muted">
          {data.entries.toLocaleString("en-US")} entries in {data.chains.toLocaleString("en-US")} chain{data.chains === 1 ? "" : "s"}
          {data.scope ? ` (chain ${data.scope})` : ""} recomputed {formatDateTime(data.verified_at)} in {data.seconds.toFixed(2)} s.
          {ok ? " No entry was edited, deleted, reordered or cut from the end." : " An edit, a deletion or a reordering was found:"}
        </div>
        {!ok ? (
          <ul className="verify-problems">
            {data.problems.map((p, i) => (
              <li key={i}><code>{p.scope}</code>{p.seq !== null ? ` seq ${p.seq}` : ""}{p.entry_id !== null ? ` (entry ${p.entry_id})` : ""}: {p.message}</li>
            ))}
          </ul>
        ) : null}
      </div>
      <Button size="small" onClick={reload} disabled={loading}>{loading ? "Verifying…" : "Verify again"}</Button>
    </section>
  );
}

export default function Audit() {
  const [applied, setApplied] = useState<AuditFilters>(() => auditFiltersFromSearch(window.location.search));
  const [draft, setDraft] = useState<AuditFilters>(applied);
  const [cursorPath, setCursorPath] = useState<string | null>(null);
  const [pageNo, setPageNo] = useState(1);
  const facets = useApi<AuditFacets>("audit/facets/");
  const query = auditQuery(applied);
  const first = `audit/?page_size=${PAGE_SIZE}${query ? `&${query}` : ""}`;
  const { data, error, loading, reload } = useApi<CursorPage<AuditEntry>>(cursorPath ?? first);

  useEffect(() => {
    window.history.replaceState(null, "", query ? `?${query}` : window.location.pathname);
  }, [query]);

  const apply = (next: AuditFilters) => {
    setApplied(next);
    setDraft(next);
    setCursorPath(null);
    setPageNo(1);
  };
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    apply(draft);
  };
  const go = (url: string, step: number) => { setCursorPath(pagePath(url)); setPageNo((n) => n + step); };
  const field = (key: keyof AuditFilters) => ({ value: draft[key], onChange: (e: { target: { value: string } }) => setDraft((d) => ({ ...d, [key]: e.target.value })) });
  const filtered = query !== "";
  const exportHref = (kind: string) => `${API_ROOT}audit/export/?${auditQuery(applied, { kind })}`;

  return (
    <main className="page audit-page">
      <PageHeader
        title="Audit log"
        subtitle="Who did what to which object, and when. Entries are chained by hash: an edit or a deletion shows below."
        actions={
          <>
            <ButtonLink href={exportHref("csv")} download>Export CSV</ButtonLink>
            <ButtonLink href={exportHref("jsonl")} download>Export JSONL</ButtonLink>
          </>
        }
      />
      <Verification onlyScope="" />
      <form className="card" aria-label="Filters" onSubmit={onSubmit}>
        <div className="filters-grid">
          <label>Actor<input {...field("actor")} placeholder="a username, a worker id" autoComplete="off" /></label>
          <label>Actor type
            <select {...field("actor_type")}>
              <option value="">Any</option>
              {(facets.data?.actor_type ?? []).map((v) => <option key={v} value={v}>{v}</option>)}
            </select>
          </label>
          <label>Verb
            <select {...field("action")}>
              <option value="">Any</option>
              {(facets.data?.action ?? []).map((v) => <option key={v} value={v}>{v}</option>)}
            </select>
          </label>
          <label>Object type
            <select {...field("object_type")}>
              <option value="">Any</option>
              {(facets.data?.object_type ?? []).map((v) => <option key={v} value={v}>{v}</option>)}
            </select>
          </label>
          <label>Object id<input {...field("object_id")} placeholder="e.g. 42" autoComplete="off" /></label>
          <label>From<input type="date" {...field("since")} max={draft.until || undefined} /></label>
          <label>To<input type="date" {...field("until")} min={draft.since || undefined} /></label>
          <div className="filters-actions">
            <Button type="submit" variant="primary">Apply filters</Button>
            <Button disabled={!filtered && auditQuery(draft) === ""} onClick={() => apply(NO_FILTERS)}>Clear</Button>
          </div>
        </div>
      </form>
      {error ? <ErrorMessage error={error} title="The audit log could not be loaded." onRetry={reload} /> : null}
      {!data && loading ? <Skeleton lines={8} variant="table" label="Loading the audit log…" /> : null}
      {data && data.results.length === 0 ? (
        <EmptyState title={filtered ? "No entry matches these filters" : "The audit log is empty"}>
          {filtered ? "Widen the day range or clear a filter." : "Entries appear as people and workers start runs, decide approvals and change graphs."}
        </EmptyState>
      ) : null}
      {data && data.results.length > 0 ? (
        <div className="table-wrap">
          <table className="table" aria-label="Audit entries">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Actor</th>
                <th scope="col">Verb</th>
                <th scope="col">Object</th>
                <th scope="col">Details</th>
                <th scope="col">Chain</th>
              </tr>
            </thead>
            <tbody>
              {data.results.map((e) => {
                const href = objectLink(e);
                const { version, objectIsVersion, details } = auditCells(e);
                return (
                  <tr key={e.id}>
                    <td className="nowrap">{formatDateTime(e.created_at)}</td>
                    <td>{e.actor}{e.actor_type !== e.actor ? <> <span className="badge badge-plain">{e.actor_type}</span></> : null}</td>
                    <td><code>{e.action}</code></td>
                    <td>{objectIsVersion && version ? <>version <VersionLink v={version} /></>
                      : href ? <a href={href}>{e.object_type} {e.object_id}</a> : `${e.object_type} ${e.object_id}`}</td>
                    <td className="audit-data" title={details}>
                      {version && !objectIsVersion ? <span className="audit-version"><VersionLink v={version} />{details ? " " : ""}</span> : null}
                      {details.length > 160 ? `${details.slice(0, 160)}…` : details}
                    </td>
                    <td className="hash" title={`hash ${e.hash}\nprev ${e.prev_hash}`}>{e.scope} #{e.seq}<br />{e.hash.slice(0, 12)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
      {data && (data.next || data.previous) ? (
        <nav className="pager" aria-label="Pages">
          <Button size="small" disabled={!data.previous} onClick={() => data.previous && go(data.previous, -1)}>Newer</Button>
          <span className="muted">Page {pageNo}</span>
          <Button size="small" disabled={!data.next} onClick={() => data.next && go(data.next, 1)}>Older</Button>
        </nav>
      ) : null}
    </main>
  );
}
