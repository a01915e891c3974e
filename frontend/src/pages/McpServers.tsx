// /mcp-servers/ (staff): the MCP servers whose tools nodes and agents may call; add one (a stdio command from the allow-list, or an HTTP URL with write-only headers), change it, test its connection and see the tools it lists, remove it.
import type { McpServerRow, McpTestResult, McpTool } from "../api/types";
import { useState, type FormEvent, type ReactNode } from "react";
import { api, ApiError } from "../lib/api";
import { ErrorMessage, Loading, Modal, PageHeader, Skeleton } from "../shell/ui";
import { epochMs, formatAgo, formatDateTime, useNow } from "../lib/time";
import { useApi } from "../shell/useApi";
import "./admin.css";
import { Button } from "../shell/Button";
import { ConfirmDialog } from "../shell/ConfirmDialog";
import { useConnectionTests, type ConnectionTest } from "../shell/useConnectionTests";

/** The form's fields; an API error on ``args.0`` or ``headers.X`` is shown at ``args`` / ``headers``. */
const FIELDS = ["name", "label", "transport", "command", "args", "url", "headers", "trust_annotations", "enabled"] as const;

/** The API's field errors by form field: ``{field: "message"}``, nested paths under their field. */
export function mcpFieldErrors(error: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!(error instanceof ApiError)) return out;
  for (const [path, messages] of Object.entries(error.fields)) {
    const head = path.split(/[.[]/)[0]!;
    const field = (FIELDS as readonly string[]).includes(head) ? head : null;
    if (field === null) continue;
    const text = path === field ? messages.join(" ") : `${path.slice(field.length).replace(/^[.[]/, "").replace(/]$/, "")}: ${messages.join(" ")}`;
    out[field] = out[field] ? `${out[field]} ${text}` : text;
  }
  return out;
}

/** The server's own hints of a tool: whether it says it is read-only and idempotent. */
export function toolHints(tool: McpTool): { readOnly: boolean; idempotent: boolean } {
  const notes = (tool.annotations ?? {}) as Record<string, unknown>;
  return { readOnly: notes.readOnlyHint === true, idempotent: notes.idempotentHint === true };
}

/** The command line of a stdio server, or the URL of an HTTP one. */
function endpoint(server: McpServerRow): string {
  if (server.transport === "http") return server.url;
  return [server.command, ...server.args.map((a) => (/[\s"']/.test(a) || a === "" ? JSON.stringify(a) : a))].join(" ");
}

interface HeaderRow { name: string; value: string }

/** Add a server (``server`` null) or change one; the API's refusals appear at their fields. */
export function McpServerDialog({ server, stdioCommands, onClose, onDone }: {
  server: McpServerRow | null;
  stdioCommands: string[];
  onClose: () => void;
  onDone: (saved: McpServerRow) => void;
}) {
  const editing = server !== null;
  const [name, setName] = useState(server?.name ?? "");
  const [label, setLabel] = useState(server?.label ?? "");
  const [transport, setTransport] = useState<"stdio" | "http">(server?.transport ?? (stdioCommands.length ? "stdio" : "http"));
  const [command, setCommand] = useState(server?.command || stdioCommands[0] || "");
  const [args, setArgs] = useState((server?.args ?? []).join("\n"));
  const [url, setUrl] = useState(server?.url ?? "");
  // Headers are write-only: an edit keeps the stored ones unless they are replaced or removed.
  const [headerMode, setHeaderMode] = useState<"keep" | "replace" | "remove">(server?.has_headers ? "keep" : "replace");
  const [headers, setHeaders] = useState<HeaderRow[]>([{ name: "", value: "" }]);
  const [trust, setTrust] = useState(server?.trust_annotations ?? false);
  const [enabled, setEnabled] = useState(server?.enabled ?? true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  // A command the allow-list no longer names still shows (saving it is refused at its field).
  const commands = command && !stdioCommands.includes(command) ? [...stdioCommands, command] : stdioCommands;

  const body = (): Record<string, unknown> => {
    const out: Record<string, unknown> = { label: label.trim(), transport, trust_annotations: trust, enabled };
    if (!editing) out.name = name.trim();
    if (transport === "stdio") {
      out.command = command;
      // One argument a line: an argument may hold spaces; blank lines at the end are not arguments.
      const lines = args.split("\n");
      while (lines.length && lines[lines.length - 1]!.trim() === "") lines.pop();
      out.args = lines;
    } else {
      out.url = url.trim();
      if (headerMode === "remove") out.headers = {};
      else if (headerMode === "replace") {
        const filled = headers.filter((h) => h.name.trim() !== "" || h.value !== "");
        if (filled.length || editing) out.headers = Object.fromEntries(filled.map((h) => [h.name.trim(), h.value]));
      }
    }
    return out;
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const saved = editing
        ? await api<McpServerRow>(`mcp-servers/${encodeURIComponent(server.name)}/`, { method: "PATCH", body: body() })
        : await api<McpServerRow>("mcp-servers/", { method: "POST", body: body() });
      onDone(saved);
      onClose();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  const errors = mcpFieldErrors(error);
  const field = (id: string, f: string, labelText: string, input: ReactNode, help?: ReactNode) => (
    <div className={`field${errors[f] ? " field-invalid" : ""}`}>
      <label htmlFor={id}>{labelText}</label>
      {input}
      {help ? <p className="field-help">{help}</p> : null}
      {errors[f] ? <div className="field-error" role="alert" id={`${id}-error`}>{errors[f]}</div> : null}
    </div>
  );
  const invalid = (id: string, f: string) => ({ "aria-invalid": errors[f] ? true : undefined, "aria-describedby": errors[f] ? `${id}-error` : undefined });
  const other = error !== null && Object.keys(errors).length === 0;
  const setHeader = (i: number, patch: Partial<HeaderRow>) => setHeaders((rows) => rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <Modal title={editing ? `Edit ${server.name}` : "Add an MCP server"} onClose={onClose}>
      <form onSubmit={submit} className="form mcp-form" noValidate>
        {field("mcp-name", "name", "Name",
          <input id="mcp-name" value={name} onChange={(e) => setName(e.target.value)} disabled={editing} maxLength={40} autoFocus={!editing}
            placeholder="e.g. github" autoComplete="off" {...invalid("mcp-name", "name")} />,
          editing ? "A name cannot change: its tools are named after it." : <>Letters, digits and “-”. Its tools are named <code>mcp__{name.trim() || "name"}__tool</code>.</>)}
        {field("mcp-label", "label", "Label (optional)",
          <input id="mcp-label" value={label} onChange={(e) => setLabel(e.target.value)} maxLength={200} autoComplete="off" {...invalid("mcp-label", "label")} />)}
        <fieldset className="field">
          <legend className="field-label">Transport</legend>
          <div className="radio-row radio-row--inline">
            <label><input type="radio" name="mcp-transport" value="stdio" checked={transport === "stdio"} onChange={() => setTransport("stdio")} /> stdio (a local process)</label>
            <label><input type="radio" name="mcp-transport" value="http" checked={transport === "http"} onChange={() => setTransport("http")} /> Streamable HTTP (a remote endpoint)</label>
          </div>
          {errors.transport ? <div className="field-error" role="alert">{errors.transport}</div> : null}
        </fieldset>
        {transport === "stdio" ? (
          <>
            {field("mcp-command", "command", "Command",
              <select id="mcp-command" value={command} onChange={(e) => setCommand(e.target.value)} {...invalid("mcp-command", "command")}>
                {commands.length === 0 ? <option value="">No command is allowed</option> : null}
                {commands.map((c) => <option key={c} value={c}>{c}</option>)}
              </select>,
              commands.length === 0
                ? <>This deployment allows no stdio command: the operator lists them in <code>BALLAST_MCP_STDIO_COMMANDS</code>.</>
                : <>The commands the operator allows (<code>BALLAST_MCP_STDIO_COMMANDS</code>).</>)}
            {field("mcp-args", "args", "Arguments",
              <textarea id="mcp-args" className="mono" rows={3} value={args} onChange={(e) => setArgs(e.target.value)} spellCheck={false}
                placeholder={"-y\n@modelcontextprotocol/server-filesystem\n/srv/data"} {...invalid("mcp-args", "args")} />,
              "One argument a line, as the command receives it (no shell quoting).")}
          </>
        ) : (
          <>
            {field("mcp-url", "url", "URL",
              <input id="mcp-url" inputMode="url" value={url} onChange={(e) => setUrl(e.target.value)} maxLength={500} placeholder="https://mcp.example.com/mcp"
                autoComplete="off" {...invalid("mcp-url", "url")} />,
              "The server's Streamable HTTP endpoint.")}
            <fieldset className={`field${errors.headers ? " field-invalid" : ""}`}>
              <legend className="field-label">Headers</legend>
              {server?.has_headers ? (
                <div className="radio-row radio-row--inline">
                  <label><input type="radio" name="mcp-header-mode" checked={headerMode === "keep"} onChange={() => setHeaderMode("keep")} /> Keep the stored headers</label>
                  <label><input type="radio" name="mcp-header-mode" checked={headerMode === "replace"} onChange={() => setHeaderMode("replace")} /> Replace them</label>
                  <label><input type="radio" name="mcp-header-mode" checked={headerMode === "remove"} onChange={() => setHeaderMode("remove")} /> Remove them</label>
                </div>
              ) : null}
              {headerMode === "replace" ? (
                <div className="header-rows">
                  {headers.map((h, i) => (
                    <div className="header-row" key={i}>
                      <input aria-label={`Header ${i + 1} name`} value={h.name} onChange={(e) => setHeader(i, { name: e.target.value })} placeholder="Authorization" autoComplete="off" />
                      <input aria-label={`Header ${i + 1} value`} type="password" value={h.value} onChange={(e) => setHeader(i, { value: e.target.value })} placeholder="Bearer …" autoComplete="off" />
                      <Button variant="danger-ghost" size="small" icon aria-label={`Remove header ${i + 1}`} disabled={headers.length === 1 && !h.name && !h.value}
                        onClick={() => setHeaders((rows) => (rows.length === 1 ? [{ name: "", value: "" }] : rows.filter((_, j) => j !== i)))}>×</Button>
                    </div>
                  ))}
                  <div><Button size="small" onClick={() => setHeaders((rows) => [...rows, { name: "", value: "" }])}>Add header</Button></div>
                </div>
              ) : null}
              <p className="field-help">Sent with every request (e.g. Authorization). Stored encrypted; never shown again, not even to you.</p>
              {errors.headers ? <div className="field-error" role="alert">{errors.headers}</div> : null}
            </fieldset>
          </>
        )}
        <div className="field">
          <label className="checkbox-field"><input type="checkbox" checked={trust} onChange={(e) => setTrust(e.target.checked)} /> Trust its annotations</label>
          <p className="field-help">A tool the server marks read-only or idempotent is then treated as safe to repeat when a step is retried. The hints are the server's own claims.</p>
          {errors.trust_annotations ? <div className="field-error" role="alert">{errors.trust_annotations}</div> : null}
        </div>
        <div className="field">
          <label className="checkbox-field"><input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} /> Enabled</label>
          <p className="field-help">A disabled server's tools are not offered to nodes and agents.</p>
        </div>
        {other ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || (!editing && !name.trim())}>
            {busy ? (editing ? "Saving…" : "Adding…") : editing ? "Save changes" : "Add server"}
          </Button>
        </div>
      </form>
    </Modal>
  );
}

/** The tools a server lists, with the hints it gives for each. */
export function ToolTable({ server }: { server: McpServerRow }) {
  if (server.tools.length === 0) return <p className="muted small">It lists no tools.</p>;
  return (
    <table className="table mcp-tools" aria-label={`Tools of ${server.name}`}>
      <thead>
        <tr>
          <th scope="col">Tool</th>
          <th scope="col">Description</th>
          <th scope="col">Read-only</th>
          <th scope="col">Idempotent</th>
          <th scope="col" title="Whether a retried step may call it again: trusted hints say read-only or idempotent">Safe to repeat</th>
        </tr>
      </thead>
      <tbody>
        {server.tools.map((t) => {
          const hints = toolHints(t);
          return (
            <tr key={t.name}>
              <td><strong>{t.tool}</strong><div className="muted small"><code>{t.name}</code></div></td>
              <td className="mcp-tools__description">{t.description || <span className="muted">—</span>}</td>
              <td>{hints.readOnly ? "yes" : <span className="muted">no</span>}</td>
              <td>{hints.idempotent ? "yes" : <span className="muted">no</span>}</td>
              <td>{t.repeat_safe ? "yes" : <span className="muted">no</span>}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** When the tools were listed: "2 minutes ago", the full time on hover. */
function ListedAt({ at }: { at: string }) {
  const now = useNow(10_000);
  // ``now`` is read every 10 s: a listing newer than it is "just now", never "in 2 s".
  return <time dateTime={at} title={formatDateTime(at, "minute")}>{(epochMs(at) ?? 0) > now ? "just now" : formatAgo(at, now)}</time>;
}

type Testing = ConnectionTest<McpTestResult>;

/** Under a server's row: the last test's outcome, then the tools it lists. */
function ServerDetail({ server, test }: { server: McpServerRow; test: Testing | undefined }) {
  return (
    <div className="mcp-detail" role="region" aria-label={`Connection of ${server.name}`}>
      {test === "testing" ? <Loading label="Connecting and listing its tools…" /> : null}
      {test instanceof Error ? <ErrorMessage error={test} /> : null}
      {test !== undefined && test !== "testing" && !(test instanceof Error) ? (
        <p role="status" className={test.ok ? "test-ok" : "test-failed"}>
          <strong>{test.ok ? "Connected" : "Failed"}</strong> · {test.latency_ms} ms · {test.message}
        </p>
      ) : null}
      {test === undefined && server.last_error ? <p className="test-failed">Last listing failed: {server.last_error}</p> : null}
      {server.tools_listed_at ? (
        <>
          <p className="muted small">Tools as listed <ListedAt at={server.tools_listed_at} />:</p>
          <ToolTable server={server} />
        </>
      ) : test === "testing" ? null : <p className="muted small">Its tools have not been listed yet.</p>}
    </div>
  );
}

export default function McpServers({ stdioCommands = [] }: { stdioCommands?: string[] }) {
  const list = useApi<McpServerRow[]>("mcp-servers/");
  const [editing, setEditing] = useState<McpServerRow | "new" | null>(null);
  const [removing, setRemoving] = useState<McpServerRow | null>(null);
  const [open, setOpen] = useState<Record<string, boolean>>({});
  // The test stores the tools it listed: the list is read again to show them.
  const connection = useConnectionTests<McpTestResult>("mcp-servers", () => list.reload());
  const tests = connection.tests;
  const test = (name: string) => {
    setOpen((o) => ({ ...o, [name]: true }));
    connection.test(name);
  };
  const saved = (server: McpServerRow) => {
    connection.forget(server.name);
    list.reload();
  };
  const servers = list.data ?? [];
  return (
    <main className="page admin-page">
      <PageHeader
        title="MCP servers"
        subtitle="Model Context Protocol servers whose tools LLM and agent nodes may call, named mcp__server__tool. Header values are stored encrypted and never shown again."
        actions={<Button variant="primary" onClick={() => setEditing("new")}>Add MCP server</Button>}
      />
      <section className="card">
        {list.error ? <ErrorMessage error={list.error} onRetry={list.reload} /> : null}
        {list.loading && !list.data ? <Skeleton lines={4} variant="table" /> : null}
        {list.data && servers.length === 0 ? (
          <div className="empty">
            <div className="empty-title">No MCP servers yet</div>
            <div className="empty-body">Add a server to offer its tools to LLM and agent nodes: a local command speaking MCP on stdio, or a Streamable HTTP URL.</div>
          </div>
        ) : null}
        {servers.length > 0 ? (
          <div className="table-wrap">
            <table className="table" aria-label="MCP servers">
              <thead>
                <tr>
                  <th scope="col">Server</th>
                  <th scope="col">Transport</th>
                  <th scope="col">Command or URL</th>
                  <th scope="col">Annotations</th>
                  <th scope="col">State</th>
                  <th scope="col" className="num">Tools</th>
                  <th scope="col"><span className="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                {servers.map((s) => (
                  <ServerRows key={s.name} server={s} open={open[s.name] ?? false} test={tests[s.name]}
                    onToggle={() => setOpen((o) => ({ ...o, [s.name]: !o[s.name] }))} onTest={() => test(s.name)}
                    onEdit={() => setEditing(s)} onRemove={() => setRemoving(s)} />
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </section>
      {editing !== null ? (
        <McpServerDialog server={editing === "new" ? null : editing} stdioCommands={stdioCommands} onClose={() => setEditing(null)}
          onDone={(s) => { saved(s); setOpen((o) => ({ ...o, [s.name]: true })); }} />
      ) : null}
      {removing ? (
        <ConfirmDialog title={`Remove ${removing.name}?`} action="Remove server" busy="Removing…"
          act={() => api(`mcp-servers/${encodeURIComponent(removing.name)}/`, { method: "DELETE" })}
          onClose={() => setRemoving(null)} onDone={() => { setRemoving(null); list.reload(); }}>
          <p>Nodes and agents that name its tools (<code>mcp__{removing.name}__…</code>) fail until they name others. {removing.has_headers ? "Its stored headers are deleted." : ""}</p>
        </ConfirmDialog>
      ) : null}
    </main>
  );
}

function ServerRows({ server: s, open, test, onToggle, onTest, onEdit, onRemove }: {
  server: McpServerRow; open: boolean; test: Testing | undefined;
  onToggle: () => void; onTest: () => void; onEdit: () => void; onRemove: () => void;
}) {
  const failing = s.last_error !== "" && (test === undefined || test === "testing" || test instanceof Error || !test.ok);
  return (
    <>
      <tr aria-label={`MCP server ${s.name}`}>
        <td>
          <strong>{s.name}</strong>
          {s.label ? <div className="muted small">{s.label}</div> : null}
        </td>
        <td><span className="name-chip">{s.transport === "http" ? "HTTP" : "stdio"}</span></td>
        <td className="mcp-endpoint">
          <code title={endpoint(s)}>{endpoint(s)}</code>
          {s.has_headers ? <div className="muted small">headers set</div> : null}
        </td>
        <td>{s.trust_annotations ? "Trusted" : <span className="muted">Not trusted</span>}</td>
        <td>
          {s.enabled ? <span className="badge status-badge status-succeeded">Enabled</span> : <span className="badge badge-plain">Disabled</span>}
          {failing ? <div className="small test-failed" title={s.last_error}>Last listing failed</div> : null}
        </td>
        <td className="num">
          <Button variant="link" aria-expanded={open} onClick={onToggle} aria-label={`${open ? "Hide" : "Show"} the tools of ${s.name}`}>
            {s.tools_listed_at === null ? <span className="small">not listed</span> : s.tools.length}
          </Button>
        </td>
        <td className="num nowrap">
          <Button size="small" onClick={onTest} disabled={test === "testing"} aria-label={`Test connection of ${s.name}`}>Test connection</Button>
          {" "}<Button size="small" onClick={onEdit} aria-label={`Edit ${s.name}`}>Edit</Button>
          {" "}<Button variant="danger-ghost" size="small" onClick={onRemove} aria-label={`Remove ${s.name}`}>Remove</Button>
        </td>
      </tr>
      {open ? (
        <tr className="mcp-detail-row">
          <td colSpan={7}><ServerDetail server={s} test={test} /></td>
        </tr>
      ) : null}
    </>
  );
}
