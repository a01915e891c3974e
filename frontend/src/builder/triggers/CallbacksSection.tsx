// The graph's completion callbacks in the Triggers panel: each with its URL, events, enable switch, Rotate secret and Delete; a form to add one (its secret shown once); the delivery log with Redeliver.
import type { Callback, CallbackCreated, CallbackDelivery, Page, RotatedSecret } from "../../api/types";
import { useEffect, useState } from "react";
import { api, ApiError } from "../../lib/api";
import { Dialog } from "../Dialog";
import { timeAgo } from "../versions/VersionsPanel";
import { useListLoad } from "./useListLoad";
import { failureText, POLL_MS } from "./webhooks";
import { Button } from "../../shell/Button";

/** The events a callback can be sent for, in the API's order, with their labels. */
export const CALLBACK_EVENTS: { value: Callback["events"][number]; label: string }[] = [
  { value: "succeeded", label: "Run succeeded" },
  { value: "failed", label: "Run failed" },
  { value: "waiting", label: "Waiting at an approval gate" },
  { value: "parked", label: "Step parked" },
];

/** Deliveries shown in the log. */
export const DELIVERIES_SHOWN = 10;

function errorText(err: unknown): string {
  const fields = err instanceof ApiError ? Object.entries(err.fields).map(([k, v]) => `${k}: ${v.join(" ")}`) : [];
  return [failureText(err), ...fields].join(" ");
}

/** The completion callbacks of graph ``graphId`` and their delivery log. */
export function CallbacksSection({ graphId }: { graphId: number }) {
  const base = `graphs/${graphId}/callbacks/`;
  const { load, reload } = useListLoad<Callback>(base);
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<{ name: string; secret: string; rotated: boolean } | null>(null);
  return (
    <section className="schedules callbacks" aria-label="Completion callbacks">
      <h3 className="schedules__title">Completion callbacks</h3>
      <p className="field-help">
        A callback POSTs to your URL when a run of this graph succeeds, fails, waits at a gate or has a step parked, signed as Standard
        Webhooks do (<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>). Failed sends are retried with backoff.
      </p>
      <div className="button-row">
        <Button variant="primary" onClick={() => setCreating(true)}>New callback</Button>
      </div>
      {load.kind === "loading" && <p className="panel-empty" role="status">Loading callbacks…</p>}
      {load.kind === "failed" && (
        <div className="panel-error" role="alert">
          Could not load the callbacks: {load.message}{" "}
          <Button size="small" onClick={() => void reload()}>Try again</Button>
        </div>
      )}
      {load.kind === "ready" && load.items.length === 0 && <p className="panel-empty">No callbacks yet.</p>}
      {load.kind === "ready" && load.items.length > 0 && (
        <ul className="webhook-list">
          {load.items.map((cb) => (
            <CallbackCard key={cb.id} callback={cb} base={`${base}${cb.id}/`} onChanged={reload}
              onRotated={(value) => setSecret({ name: cb.name, secret: value, rotated: true })} />
          ))}
        </ul>
      )}
      <DeliveryLog graphId={graphId} />
      {creating && (
        <CallbackDialog base={base} onClose={() => setCreating(false)}
          onCreated={(created) => { setCreating(false); setSecret({ name: created.name, secret: created.secret, rotated: false }); void reload(); }} />
      )}
      {secret && (
        <Dialog title={secret.rotated ? `New secret for “${secret.name}”` : `Callback “${secret.name}” created`} onClose={() => setSecret(null)} wide>
          <p className="secret-warning" role="note">
            <strong>Copy the secret now: you will not see it again.</strong> Ballast keeps it encrypted.
            {secret.rotated ? " Sends from now on are signed with it, retries included." : " A lost secret can be rotated."}
          </p>
          <div className="copy-field">
            <label htmlFor="callback-secret">Signing secret</label>
            <div className="copy-field__row">
              <input id="callback-secret" className="mono" readOnly value={secret.secret} onFocus={(e) => e.currentTarget.select()} />
            </div>
          </div>
          <p className="field-help">
            Verify each request: <code>webhook-signature</code> is <code>v1,</code> and the base64 HMAC-SHA256 of{" "}
            <code>{"<webhook-id>.<webhook-timestamp>.<raw body>"}</code> keyed by the bytes after <code>whsec_</code> (base64);
            deduplicate by <code>webhook-id</code>.
          </p>
          <div className="dialog__actions">
            <Button variant="primary" onClick={() => setSecret(null)}>I have copied it</Button>
          </div>
        </Dialog>
      )}
    </section>
  );
}

/** One callback: URL, events, the enable switch, Rotate secret and Delete (confirmed). */
function CallbackCard({ callback, base, onChanged, onRotated }: {
  callback: Callback; base: string; onChanged: () => Promise<void>; onRotated: (secret: string) => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<"rotate" | "delete" | null>(null);
  const act = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try { await work(); } catch (err) { setError(errorText(err)); } finally { setBusy(false); }
  };
  const labels = CALLBACK_EVENTS.filter((e) => callback.events.includes(e.value)).map((e) => e.label.toLowerCase());
  return (
    <li className="webhook-card" aria-label={`Callback ${callback.name}`}>
      <div className="webhook-card__head">
        <strong className="webhook-card__name">{callback.name}</strong>
        <span className={`badge ${callback.enabled ? "badge-ok" : "badge-plain"}`}>{callback.enabled ? "enabled" : "disabled"}</span>
        <label className="switch" title={callback.enabled ? "Disable: no new deliveries" : "Enable"}>
          <input type="checkbox" checked={callback.enabled} disabled={busy} aria-label={`Enabled (${callback.name})`}
            onChange={(e) => void act(async () => { await api(base, { method: "PATCH", body: { enabled: e.target.checked } }); await onChanged(); })} />
        </label>
      </div>
      <p className="webhook-card__meta mono">{callback.url}</p>
      <p className="webhook-card__meta">On: {labels.join(", ")}</p>
      <div className="button-row">
        <Button size="small" onClick={() => setConfirm("rotate")}>Rotate secret</Button>
        <Button variant="danger-ghost" size="small" onClick={() => setConfirm("delete")}>Delete</Button>
      </div>
      {confirm && (
        <div className="confirm-box" role="alertdialog" aria-labelledby={`confirm-cb-${callback.id}`}>
          <p id={`confirm-cb-${callback.id}`}>
            {confirm === "rotate"
              ? `Make a new secret for “${callback.name}”? Requests are signed with the new one from now on; your receiver must switch.`
              : `Delete “${callback.name}”? Its pending deliveries are not sent and its log goes.`}
          </p>
          <div className="button-row confirm-box__buttons">
            <Button onClick={() => setConfirm(null)}>Cancel</Button>
            <Button variant={confirm === "delete" ? "danger" : "primary"} disabled={busy}
              onClick={() => void act(async () => {
                if (confirm === "rotate") {
                  const rotated = await api<RotatedSecret>(`${base}rotate-secret/`, { method: "POST" });
                  setConfirm(null);
                  onRotated(rotated.secret);
                } else {
                  await api(base, { method: "DELETE" });
                  setConfirm(null);
                  await onChanged();
                }
              })}>
              {confirm === "rotate" ? "Rotate secret" : "Delete callback"}
            </Button>
          </div>
        </div>
      )}
      {error && <p className="panel-error" role="alert">{error}</p>}
    </li>
  );
}

/** The form that adds a callback; the server's field errors shown under their fields. */
function CallbackDialog({ base, onClose, onCreated }: { base: string; onClose: () => void; onCreated: (created: CallbackCreated) => void }) {
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>(["succeeded", "failed"]);
  const [fields, setFields] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async () => {
    setBusy(true);
    setError(null);
    setFields({});
    try {
      onCreated(await api<CallbackCreated>(base, { method: "POST", body: { name: name.trim(), url: url.trim(), events } }));
    } catch (err) {
      if (err instanceof ApiError && Object.keys(err.fields).length > 0) {
        setFields(Object.fromEntries(Object.entries(err.fields).map(([k, v]) => [k, v.join(" ")])));
      } else {
        setError(failureText(err));
      }
    } finally {
      setBusy(false);
    }
  };
  const toggle = (value: string, on: boolean) => setEvents(on ? [...events, value] : events.filter((e) => e !== value));
  return (
    <Dialog title="New completion callback" onClose={onClose} wide>
      <form className="webhook-form" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
        <label className="field">
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} aria-invalid={!!fields.name} />
          {fields.name && <p className="field-error" role="alert">{fields.name}</p>}
        </label>
        <label className="field">
          URL
          <input value={url} onChange={(e) => setUrl(e.target.value)} required placeholder="https://example.com/ballast-callbacks"
            aria-invalid={!!fields.url} />
          {fields.url && <p className="field-error" role="alert">{fields.url}</p>}
        </label>
        <fieldset className="mapping">
          <legend>Send when</legend>
          {CALLBACK_EVENTS.map((e) => (
            <label key={e.value} className="checkbox-field">
              <input type="checkbox" checked={events.includes(e.value)} onChange={(ev) => toggle(e.value, ev.target.checked)} />
              {e.label}
            </label>
          ))}
          {fields.events && <p className="field-error" role="alert">{fields.events}</p>}
        </fieldset>
        {error && <p className="panel-error" role="alert">{error}</p>}
        <div className="dialog__actions">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy}>Create callback</Button>
        </div>
      </form>
    </Dialog>
  );
}

/** The graph's latest deliveries (its callbacks' and its runs' own), polled; undeliverable ones can be redelivered. */
function DeliveryLog({ graphId }: { graphId: number }) {
  const base = `graphs/${graphId}/callback-deliveries/`;
  const [failedOnly, setFailedOnly] = useState(false);
  const [rows, setRows] = useState<CallbackDelivery[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    let timer = 0;
    const load = async () => {
      try {
        const page = await api<Page<CallbackDelivery>>(`${base}?page_size=${DELIVERIES_SHOWN}${failedOnly ? "&status=failed" : ""}`);
        if (live) { setRows(page.results); setError(null); }
      } catch (err) {
        if (live) setError(failureText(err));
      }
      if (live) timer = window.setTimeout(() => void load(), POLL_MS * 2);
    };
    void load();
    return () => { live = false; window.clearTimeout(timer); };
  }, [base, failedOnly, tick]);
  const redeliver = async (id: number) => {
    try {
      await api(`${base}${id}/redeliver/`, { method: "POST" });
      setTick((t) => t + 1);
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <div className="callback-log" role="group" aria-label="Callback deliveries">
      <div className="callback-log__head">
        <strong>Deliveries</strong>
        <label className="checkbox-field">
          <input type="checkbox" checked={failedOnly} onChange={(e) => setFailedOnly(e.target.checked)} /> Undeliverable only
        </label>
      </div>
      {error && <p className="panel-error" role="alert">{error}</p>}
      {rows === null && !error && <p className="panel-empty" role="status">Loading deliveries…</p>}
      {rows !== null && rows.length === 0 && <p className="panel-empty">{failedOnly ? "No undeliverable deliveries." : "No deliveries yet."}</p>}
      {rows !== null && rows.length > 0 && (
        <table className="deliveries callback-log__table" aria-label="Callback deliveries">
          <thead>
            <tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Status</th></tr>
          </thead>
          {rows.map((d) => (
            <tbody key={d.id} className="callback-log__delivery">
              <tr>
                <td><time dateTime={d.created_at} title={`${new Date(d.created_at).toLocaleString()} · ${d.message_id}`}>{timeAgo(d.created_at)}</time></td>
                <td>
                  {d.event}{d.run !== null && <> · <a href={`/runs/${d.run}/`}>run #{d.run}</a></>}
                  <div className="muted">{d.callback_name}</div>
                </td>
                <td>
                  <span className={`badge ${d.status === "delivered" ? "badge-ok" : d.status === "failed" ? "badge-bad" : "badge-plain"}`}>{d.status}</span>
                  <div className="muted">{d.attempts} attempt{d.attempts === 1 ? "" : "s"}</div>
                </td>
              </tr>
              {(d.last_error || d.status !== "pending" || d.next_due_at) && (
                <tr className="callback-log__detail">
                  <td colSpan={3}>
                    {d.last_error && <div className="tick-log__error">Last error: {d.last_error}</div>}
                    {d.status === "pending" && d.next_due_at && <div className="muted">Next try {timeAgo(d.next_due_at)}</div>}
                    {d.status !== "pending" && (
                      <Button variant="link" onClick={() => void redeliver(d.id)}
                        title="Send it again with the same webhook-id and body">Redeliver</Button>
                    )}
                  </td>
                </tr>
              )}
            </tbody>
          ))}
        </table>
      )}
    </div>
  );
}
