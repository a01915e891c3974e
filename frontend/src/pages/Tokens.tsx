// /tokens/: the signed-in user's API tokens (create: the key shown once with a copy button; revoke with a confirm); staff see and revoke everyone's.
import type { ApiTokenRow, CreatedToken, Page } from "../api/types";
import { useState, type FormEvent } from "react";
import { api, ApiError } from "../lib/api";
import { usePageContext } from "../lib/context";
import { formatDateTime } from "../shell/format";
import { EmptyState, ErrorMessage, Modal, PageHeader, Skeleton } from "../shell/ui";
import { useApi } from "../shell/useApi";
import "./admin.css";
import { Button } from "../shell/Button";
import { ConfirmDialog } from "../shell/ConfirmDialog";

/** Copy ``text`` to the clipboard; falls back to selecting the field's text when the API is refused. */
export function CopyField({ id, label, value }: { id: string; label: string; value: string }) {
  const [copied, setCopied] = useState(false);
  const copy = () => {
    const done = () => setCopied(true);
    const select = () => (document.getElementById(id) as HTMLInputElement | null)?.select();
    if (navigator.clipboard) void navigator.clipboard.writeText(value).then(done, select);
    else select();
  };
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <div className="copy-field">
        <input id={id} className="mono" value={value} readOnly onFocus={(e) => e.currentTarget.select()} />
        <Button onClick={copy}>{copied ? "Copied" : "Copy"}</Button>
      </div>
    </div>
  );
}

/** Ask for a name (staff: optionally another user), create the token, then show its key once. */
export function NewTokenDialog({ staff, onClose, onCreated }: { staff: boolean; onClose: () => void; onCreated: (token: ApiTokenRow) => void }) {
  const [name, setName] = useState("");
  const [user, setUser] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [created, setCreated] = useState<CreatedToken | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, string> = { name: name.trim() };
      if (staff && user.trim()) body.user = user.trim();
      const token = await api<CreatedToken>("tokens/", { method: "POST", body });
      setCreated(token);
      onCreated(token);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  if (created) {
    return (
      <Modal title="Token created" onClose={onClose} footer={<Button variant="primary" onClick={onClose}>Done</Button>}>
        <p className="alert alert-warning">Copy the key now: it is not stored and will not be shown again.</p>
        <CopyField id="new-token-key" label={`Key of “${created.name}” for ${created.user}`} value={created.key} />
        <p className="muted small">Send it as <code>Authorization: Token {created.prefix}…</code> with every API request.</p>
      </Modal>
    );
  }
  const fieldError = (f: string) => (error instanceof ApiError ? error.fields[f]?.join(" ") : undefined);
  return (
    <Modal title="New API token" onClose={onClose}>
      <form onSubmit={submit} className="form">
        <div className={`field${fieldError("name") ? " field-invalid" : ""}`}>
          <label htmlFor="new-token-name">Name</label>
          <input id="new-token-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={200}
            placeholder="e.g. CI pipeline" aria-invalid={fieldError("name") ? true : undefined} autoFocus />
          {fieldError("name") ? <div className="field-error" role="alert">{fieldError("name")}</div> : null}
        </div>
        {staff ? (
          <div className={`field${fieldError("user") ? " field-invalid" : ""}`}>
            <label htmlFor="new-token-user">For user <span className="muted">(empty: you)</span></label>
            <input id="new-token-user" value={user} onChange={(e) => setUser(e.target.value)} maxLength={150} autoComplete="off" />
            {fieldError("user") ? <div className="field-error" role="alert">{fieldError("user")}</div> : null}
          </div>
        ) : null}
        {error && !fieldError("name") && !fieldError("user") ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || name.trim() === ""}>{busy ? "Creating…" : "Create token"}</Button>
        </div>
      </form>
    </Modal>
  );
}

export default function Tokens() {
  const ctx = usePageContext();
  const staff = ctx.user?.is_staff ?? false;
  const [everyone, setEveryone] = useState(false);
  const [creating, setCreating] = useState(false);
  const [revoking, setRevoking] = useState<ApiTokenRow | null>(null);
  const list = useApi<Page<ApiTokenRow>>(`tokens/?page_size=500${everyone ? "&all=true" : ""}`);
  const tokens = list.data?.results ?? [];
  return (
    <main className="page admin-page">
      <PageHeader
        title="API tokens"
        subtitle={<>Keys for scripts and CI: send <code>Authorization: Token &lt;key&gt;</code>. A token acts as its user, with the same roles.</>}
        actions={<Button variant="primary" onClick={() => setCreating(true)}>New token</Button>}
      />
      {staff ? (
        <div className="toolbar">
          <div className="segmented" role="group" aria-label="Whose tokens">
            <Button size="small" aria-pressed={!everyone} onClick={() => setEveryone(false)}>Mine</Button>
            <Button size="small" aria-pressed={everyone} onClick={() => setEveryone(true)}>Everyone's</Button>
          </div>
        </div>
      ) : null}
      <section className="card">
        {list.error ? <ErrorMessage error={list.error} onRetry={list.reload} /> : null}
        {list.loading && !list.data ? <Skeleton lines={4} variant="table" /> : null}
        {list.data && tokens.length === 0 ? (
          <EmptyState title="No tokens yet" actions={<Button onClick={() => setCreating(true)}>New token</Button>}>
            Create one for each script or pipeline, so you can revoke one without breaking the others.
          </EmptyState>
        ) : null}
        {tokens.length > 0 ? (
          <div className="table-wrap">
            <table className="table" aria-label="API tokens">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Key</th>
                  {everyone ? <th scope="col">User</th> : null}
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">Status</th>
                  <th scope="col"><span className="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                {tokens.map((t) => (
                  <tr key={t.id} className={t.revoked_at ? "row-muted" : undefined}>
                    <td>{t.name || <span className="muted">unnamed</span>}</td>
                    <td><code>{t.prefix}…</code></td>
                    {everyone ? <td>{t.user}</td> : null}
                    <td className="nowrap">{formatDateTime(t.created_at)}{t.created_by && t.created_by !== t.user ? <span className="muted small"> by {t.created_by}</span> : null}</td>
                    <td className="nowrap">{t.last_used_at ? formatDateTime(t.last_used_at) : <span className="muted">never</span>}</td>
                    <td>{t.revoked_at ? <span className="badge badge-plain" title={`by ${t.revoked_by}`}>Revoked {formatDateTime(t.revoked_at)}</span> : <span className="badge badge-ok">Active</span>}</td>
                    <td className="num">{t.revoked_at ? null : <Button variant="danger-ghost" size="small" onClick={() => setRevoking(t)} aria-label={`Revoke ${t.name || t.prefix}`}>Revoke</Button>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </section>
      {creating ? (
        <NewTokenDialog staff={staff} onClose={() => setCreating(false)} onCreated={(t) => {
          // A token made for someone else is not in "Mine": show everyone's, where it is.
          if (t.user !== ctx.user?.username) setEveryone(true);
          list.reload();
        }} />
      ) : null}
      {revoking ? (
        <ConfirmDialog title={`Revoke “${revoking.name || revoking.prefix}”?`} action="Revoke token" busy="Revoking…"
          act={() => api(`tokens/${revoking.id}/revoke/`, { method: "POST" })}
          onClose={() => setRevoking(null)} onDone={() => { setRevoking(null); list.reload(); }}>
          <p>Requests with the key <code>{revoking.prefix}…</code> of {revoking.user} are refused from now on. This cannot be undone.</p>
        </ConfirmDialog>
      ) : null}
    </main>
  );
}
