// /users/ (staff): users (create with a password or an invite link, deactivate, groups) and groups (create, members); roles are the groups builders, operators, approvers.
import type { GroupRow, Invite, Page, UserCreated, UserRow } from "../api/types";
import { useState, type FormEvent } from "react";
import { api, ApiError } from "../lib/api";
import { usePageContext } from "../lib/context";
import { formatDateTime } from "../shell/format";
import { PrincipalPicker } from "../shell/PrincipalPicker";
import { EmptyState, ErrorMessage, Modal, PageHeader, Skeleton } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { CopyField } from "./Tokens";
import "./admin.css";
import { Button } from "../shell/Button";

/** What each role group lets its members do (the README's roles). */
export const ROLE_HELP: Readonly<Record<string, string>> = {
  builders: "edit and publish graphs",
  operators: "start and act on runs",
  approvers: "decide approvals",
};

function fieldError(error: unknown, field: string): string | undefined {
  return error instanceof ApiError ? error.fields[field]?.join(" ") : undefined;
}

function GroupChecks({ groups, chosen, onChange, idPrefix }: { groups: GroupRow[]; chosen: string[]; onChange(next: string[]): void; idPrefix: string }) {
  if (groups.length === 0) return <p className="muted small">No groups yet.</p>;
  return (
    <div className="checkbox-list" role="group" aria-label="Groups">
      {groups.map((g) => (
        <label key={g.id} htmlFor={`${idPrefix}-${g.id}`}>
          <input id={`${idPrefix}-${g.id}`} type="checkbox" checked={chosen.includes(g.name)}
            onChange={(e) => onChange(e.target.checked ? [...chosen, g.name] : chosen.filter((n) => n !== g.name))} />
          <span>{g.name}</span>
          {ROLE_HELP[g.name] ? <span className="muted small">({ROLE_HELP[g.name]})</span> : null}
        </label>
      ))}
    </div>
  );
}

function InviteShown({ user, url, onClose }: { user: string; url: string; onClose: () => void }) {
  return (
    <Modal title={`Invite link for ${user}`} onClose={onClose} footer={<Button variant="primary" onClick={onClose}>Done</Button>}>
      <p>Send this link to {user}: it opens a page where they choose their password, then they sign in.</p>
      <CopyField id="invite-link" label="Invite link" value={url} />
      <p className="muted small">It works once, and expires like a password-reset link. You can make a new one from the user's row.</p>
    </Modal>
  );
}

export function NewUserDialog({ groups, onClose, onCreated }: { groups: GroupRow[]; onClose: () => void; onCreated: () => void }) {
  const [username, setUsername] = useState("");
  const [email, setEmail] = useState("");
  const [mode, setMode] = useState<"invite" | "password">("invite");
  const [password, setPassword] = useState("");
  const [chosen, setChosen] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [invite, setInvite] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = { username: username.trim(), email: email.trim(), groups: chosen, ...(mode === "invite" ? { invite: true } : { password }) };
      const user = await api<UserCreated>("users/", { method: "POST", body });
      onCreated();
      if (user.invite_url) setInvite(user.invite_url);
      else onClose();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  if (invite) return <InviteShown user={username.trim()} url={invite} onClose={onClose} />;
  const known = new Set(["username", "email", "password", "groups"]);
  const other = error && !(error instanceof ApiError && Object.keys(error.fields).some((f) => known.has(f)));
  return (
    <Modal title="New user" onClose={onClose}>
      <form onSubmit={submit} className="form">
        <div className={`field${fieldError(error, "username") ? " field-invalid" : ""}`}>
          <label htmlFor="new-user-username">Username</label>
          <input id="new-user-username" value={username} onChange={(e) => setUsername(e.target.value)} required maxLength={150} autoComplete="off" autoFocus
            aria-invalid={fieldError(error, "username") ? true : undefined} />
          {fieldError(error, "username") ? <div className="field-error" role="alert">{fieldError(error, "username")}</div> : null}
        </div>
        <div className={`field${fieldError(error, "email") ? " field-invalid" : ""}`}>
          <label htmlFor="new-user-email">Email <span className="muted">(optional: approval emails go here)</span></label>
          <input id="new-user-email" type="email" value={email} onChange={(e) => setEmail(e.target.value)} maxLength={254} autoComplete="off" />
          {fieldError(error, "email") ? <div className="field-error" role="alert">{fieldError(error, "email")}</div> : null}
        </div>
        <fieldset className="field">
          <legend className="visually-hidden">Password</legend>
          <div className="radio-row">
            <label><input type="radio" name="new-user-mode" checked={mode === "invite"} onChange={() => setMode("invite")} /> Invite: they choose a password from a link</label>
            <label><input type="radio" name="new-user-mode" checked={mode === "password"} onChange={() => setMode("password")} /> Set a password</label>
          </div>
        </fieldset>
        {mode === "password" ? (
          <div className={`field${fieldError(error, "password") ? " field-invalid" : ""}`}>
            <label htmlFor="new-user-password">Initial password</label>
            <input id="new-user-password" type="password" value={password} onChange={(e) => setPassword(e.target.value)} required autoComplete="new-password"
              aria-invalid={fieldError(error, "password") ? true : undefined} />
            {fieldError(error, "password") ? <div className="field-error" role="alert">{fieldError(error, "password")}</div> : null}
          </div>
        ) : fieldError(error, "password") ? <div className="field-error" role="alert">{fieldError(error, "password")}</div> : null}
        <div className="field">
          <span className="field-label">Groups</span>
          <GroupChecks groups={groups} chosen={chosen} onChange={setChosen} idPrefix="new-user-group" />
          {fieldError(error, "groups") ? <div className="field-error" role="alert">{fieldError(error, "groups")}</div> : null}
        </div>
        {other ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || username.trim() === "" || (mode === "password" && password === "")}>
            {busy ? "Creating…" : mode === "invite" ? "Create and get link" : "Create user"}
          </Button>
        </div>
      </form>
    </Modal>
  );
}

function EditUserDialog({ user, groups, self, onClose, onSaved }: { user: UserRow; groups: GroupRow[]; self: boolean; onClose: () => void; onSaved: () => void }) {
  const [chosen, setChosen] = useState<string[]>(user.groups);
  const [email, setEmail] = useState(user.email);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [invite, setInvite] = useState<string | null>(null);
  const call = async (fn: () => Promise<unknown>, close = true) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
      onSaved();
      if (close) onClose();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  if (invite) return <InviteShown user={user.username} url={invite} onClose={onClose} />;
  const save = (e: FormEvent) => {
    e.preventDefault();
    void call(() => api(`users/${user.id}/`, { method: "PATCH", body: { groups: chosen, email: email.trim() } }));
  };
  return (
    <Modal title={`Edit ${user.username}`} onClose={onClose}>
      <form onSubmit={save} className="form">
        <div className={`field${fieldError(error, "email") ? " field-invalid" : ""}`}>
          <label htmlFor="edit-user-email">Email</label>
          <input id="edit-user-email" type="email" value={email} onChange={(e) => setEmail(e.target.value)} maxLength={254} />
          {fieldError(error, "email") ? <div className="field-error" role="alert">{fieldError(error, "email")}</div> : null}
        </div>
        <div className="field">
          <span className="field-label">Groups</span>
          <GroupChecks groups={groups} chosen={chosen} onChange={setChosen} idPrefix="edit-user-group" />
        </div>
        <div className="field">
          <span className="field-label">Access</span>
          <p className="muted small">
            {!user.is_active ? "Deactivated: cannot sign in, and their API tokens are refused."
              : user.has_password ? "Signs in with a password." : "Invited: has not chosen a password yet."}
          </p>
          <div className="form-actions">
            {user.is_active ? (
              <Button size="small" disabled={busy}
                onClick={() => void call(() => api<Invite>(`users/${user.id}/invite/`, { method: "POST" }).then((r) => setInvite(r.invite_url)), false)}>
                {user.has_password ? "Password reset link" : "New invite link"}
              </Button>
            ) : null}
            {self ? null : (
              <Button size="small" variant={user.is_active ? "danger-ghost" : "default"} disabled={busy}
                onClick={() => void call(() => api(`users/${user.id}/`, { method: "PATCH", body: { is_active: !user.is_active } }))}>
                {user.is_active ? "Deactivate" : "Reactivate"}
              </Button>
            )}
          </div>
        </div>
        {error ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy}>{busy ? "Saving…" : "Save"}</Button>
        </div>
      </form>
    </Modal>
  );
}

function GroupDialog({ group, onClose, onSaved }: { group: GroupRow | null; onClose: () => void; onSaved: () => void }) {
  const [name, setName] = useState(group?.name ?? "");
  const [members, setMembers] = useState<string[]>(group?.members ?? []);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (group) await api(`groups/${group.id}/`, { method: "PATCH", body: { members } });
      else await api("groups/", { method: "POST", body: { name: name.trim(), members } });
      onSaved();
      onClose();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <Modal title={group ? `Members of ${group.name}` : "New group"} onClose={onClose}>
      <form onSubmit={submit} className="form">
        {group ? (ROLE_HELP[group.name] ? <p className="muted">A role: its members {ROLE_HELP[group.name]}.</p> : null) : (
          <div className={`field${fieldError(error, "name") ? " field-invalid" : ""}`}>
            <label htmlFor="group-name">Name</label>
            <input id="group-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={150} autoFocus
              placeholder="e.g. finance-approvers" aria-invalid={fieldError(error, "name") ? true : undefined} />
            {fieldError(error, "name") ? <div className="field-error" role="alert">{fieldError(error, "name")}</div> : null}
          </div>
        )}
        <div className="field">
          <label htmlFor="group-members">Members</label>
          <PrincipalPicker id="group-members" label="Members" kinds={["user"]} users={members} groups={[]} onChange={(u) => setMembers(u)} />
        </div>
        {error && !fieldError(error, "name") ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || (!group && name.trim() === "")}>{busy ? "Saving…" : group ? "Save members" : "Create group"}</Button>
        </div>
      </form>
    </Modal>
  );
}

function UsersTab({ groups, onChanged }: { groups: GroupRow[]; onChanged: () => void }) {
  const ctx = usePageContext();
  const [q, setQ] = useState("");
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<UserRow | null>(null);
  const list = useApi<Page<UserRow>>(`users/?page_size=500${q.trim() ? `&q=${encodeURIComponent(q.trim())}` : ""}`);
  const users = list.data?.results ?? [];
  const changed = () => { list.reload(); onChanged(); };
  return (
    <>
      <div className="admin-toolbar">
        <label className="inline-field search">
          <span className="visually-hidden">Search users</span>
          <input type="search" value={q} onChange={(e) => setQ(e.target.value)} placeholder="Search by username, name or email" />
        </label>
        <Button variant="primary" onClick={() => setCreating(true)}>New user</Button>
      </div>
      <section className="card">
        {list.error ? <ErrorMessage error={list.error} onRetry={list.reload} /> : null}
        {list.loading && !list.data ? <Skeleton lines={4} variant="table" /> : null}
        {list.data && users.length === 0 ? <EmptyState title={q ? "No user matches" : "No users"} /> : null}
        {users.length > 0 ? (
          <div className="table-wrap">
            <table className="table" aria-label="Users">
              <thead>
                <tr>
                  <th scope="col">User</th>
                  <th scope="col">Email</th>
                  <th scope="col">Groups</th>
                  <th scope="col">Status</th>
                  <th scope="col">Last sign-in</th>
                  <th scope="col"><span className="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                {users.map((u) => (
                  <tr key={u.id} className={u.is_active ? undefined : "row-muted"}>
                    <td>
                      <strong>{u.username}</strong>
                      {u.first_name || u.last_name ? <span className="muted"> {`${u.first_name} ${u.last_name}`.trim()}</span> : null}
                    </td>
                    <td>{u.email || <span className="muted">—</span>}</td>
                    <td>
                      <div className="group-list">
                        {u.is_superuser ? <span className="badge badge-busy">superuser</span> : u.is_staff ? <span className="badge badge-busy">staff</span> : null}
                        {u.groups.map((g) => <span key={g} className="name-chip">{g}</span>)}
                        {!u.is_staff && !u.is_superuser && u.groups.length === 0 ? <span className="muted small">no role: can look, not change</span> : null}
                      </div>
                    </td>
                    <td>
                      {!u.is_active ? <span className="badge badge-bad">Deactivated</span>
                        : !u.has_password ? <span className="badge badge-wait">Invited</span>
                        : <span className="badge badge-ok">Active</span>}
                    </td>
                    <td className="nowrap">{u.last_login ? formatDateTime(u.last_login) : <span className="muted">never</span>}</td>
                    <td className="num"><Button size="small" onClick={() => setEditing(u)} aria-label={`Edit ${u.username}`}>Edit</Button></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </section>
      {creating ? <NewUserDialog groups={groups} onClose={() => setCreating(false)} onCreated={changed} /> : null}
      {editing ? <EditUserDialog user={editing} groups={groups} self={editing.id === ctx.user?.id} onClose={() => setEditing(null)} onSaved={changed} /> : null}
    </>
  );
}

function GroupsTab({ groups, loading, error, onChanged }: { groups: GroupRow[]; loading: boolean; error: Error | undefined; onChanged: () => void }) {
  const [editing, setEditing] = useState<GroupRow | "new" | null>(null);
  return (
    <>
      <div className="admin-toolbar">
        <p className="muted">The groups <strong>builders</strong>, <strong>operators</strong> and <strong>approvers</strong> are the roles; any group can be named as a graph's operators or an approval node's approvers.</p>
        <Button variant="primary" onClick={() => setEditing("new")}>New group</Button>
      </div>
      <section className="card">
        {error ? <ErrorMessage error={error} onRetry={onChanged} /> : null}
        {loading && groups.length === 0 ? <Skeleton lines={4} variant="table" /> : null}
        {groups.length > 0 ? (
          <div className="table-wrap">
            <table className="table" aria-label="Groups">
              <thead>
                <tr>
                  <th scope="col">Group</th>
                  <th scope="col">Members</th>
                  <th scope="col"><span className="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                {groups.map((g) => (
                  <tr key={g.id}>
                    <td>
                      <strong>{g.name}</strong>
                      {ROLE_HELP[g.name] ? <div className="muted small">role: {ROLE_HELP[g.name]}</div> : null}
                    </td>
                    <td>
                      <div className="group-list">
                        {g.members.length ? g.members.map((m) => <span key={m} className="name-chip">{m}</span>) : <span className="muted small">nobody</span>}
                      </div>
                    </td>
                    <td className="num"><Button size="small" onClick={() => setEditing(g)} aria-label={`Edit members of ${g.name}`}>Members</Button></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </section>
      {editing ? <GroupDialog group={editing === "new" ? null : editing} onClose={() => setEditing(null)} onSaved={onChanged} /> : null}
    </>
  );
}

export default function Users() {
  const [tab, setTab] = useState<"users" | "groups">("users");
  const groups = useApi<GroupRow[]>("groups/");
  return (
    <main className="page admin-page">
      <PageHeader title="Users and groups" subtitle="Who may sign in, and what they may do. Every change here is in the audit log." />
      <div className="admin-tabs" role="tablist" aria-label="Users and groups">
        <button type="button" role="tab" aria-selected={tab === "users"} onClick={() => setTab("users")}>Users</button>
        <button type="button" role="tab" aria-selected={tab === "groups"} onClick={() => setTab("groups")}>Groups</button>
      </div>
      {tab === "users" ? (
        <UsersTab groups={groups.data ?? []} onChanged={groups.reload} />
      ) : (
        <GroupsTab groups={groups.data ?? []} loading={groups.loading} error={groups.error} onChanged={groups.reload} />
      )}
    </main>
  );
}
