// The graph's Triggers: its webhooks (create, URL and secret shown once, enable, rotate, delete), their deliveries, and "listen for a test event".
import { useCallback, useEffect, useRef, useState } from "react";
import { api, ApiError } from "../../lib/api";
import "../panel/panel.css";
import { Dialog } from "../Dialog";
import { timeAgo } from "../versions/VersionsPanel";
import {
  clock,
  deliveryOutcome,
  inputFields,
  mappingFromRows,
  rowsFromMapping,
  secondsLeft,
  splitFieldErrors,
  type Delivery,
  type ListenState,
  type MappingRow,
  type Webhook,
  type WebhookCreated,
} from "./webhooks";
import { SchedulesSection } from "./SchedulesSection";
import "./triggers.css";

/** How long a listen waits for a delivery, in seconds (the server allows up to 600). */
export const LISTEN_SECONDS = 120;
/** How often the panel asks whether the listen caught a delivery, and refreshes an open delivery list. */
const POLL_MS = 1000;
const DELIVERIES_SHOWN = 10;

export interface TriggersPanelProps {
  graphId: number;
  /** The newest published version (the version picker's range); null: nothing published yet. */
  latestVersion: number | null;
  /** The draft's input schema: its properties are offered as mapping targets. */
  inputSchema?: Record<string, unknown>;
  /** The draft's pinned test input, if any. */
  testInput: Record<string, unknown> | null;
  /** Pin ``payload`` as the draft's test input (null clears it); absent on a read-only page. */
  onPin?(payload: Record<string, unknown> | null): void;
}

interface Page<T> {
  results: T[];
}

type Load = { kind: "loading" } | { kind: "failed"; message: string } | { kind: "ready"; hooks: Webhook[] };

/** The secret (and URL) to show once, after a create or a rotate. */
interface Revealed {
  name: string;
  url?: string;
  secret: string | null;
  rotated: boolean;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The right-hand panel listing the graph's webhooks. */
export function TriggersPanel({ graphId, latestVersion, inputSchema, testInput, onPin }: TriggersPanelProps) {
  const [load, setLoad] = useState<Load>({ kind: "loading" });
  const [creating, setCreating] = useState(false);
  const [revealed, setRevealed] = useState<Revealed | null>(null);
  const base = `graphs/${graphId}/webhooks/`;

  const reload = useCallback(async () => {
    try {
      const hooks = await api<Webhook[]>(base);
      setLoad({ kind: "ready", hooks });
    } catch (err) {
      setLoad({ kind: "failed", message: message(err) });
    }
  }, [base]);
  useEffect(() => { void reload(); }, [reload]);

  return (
    <section className="versions-panel triggers-panel" aria-label="Triggers">
      <header className="panel-header">
        <h2>Triggers</h2>
        <p className="field-help">
          A webhook starts a run of this graph for each POST to its URL, checked against the input schema. Its URL and secret
          are shown once, when it is made (a secret can be rotated; a lost URL means a new webhook).
        </p>
      </header>
      {testInput && (
        <div className="pinned-input" role="region" aria-label="Pinned test input">
          <div className="pinned-input__head">
            <strong>Pinned test input</strong>
            {onPin && <button type="button" className="link-button" onClick={() => onPin(null)}>Unpin</button>}
          </div>
          <pre className="test-output">{JSON.stringify(testInput, null, 2)}</pre>
          <p className="field-help">The Run dialog starts with this input.</p>
        </div>
      )}
      <div className="button-row">
        <button type="button" className="btn btn-primary" disabled={latestVersion === null} onClick={() => setCreating(true)}
          title={latestVersion === null ? "Publish the graph first: a webhook runs a published version" : "Add a webhook URL that starts runs"}>
          New webhook
        </button>
      </div>
      {latestVersion === null && <p className="field-help">Publish the graph first: webhooks run a published version.</p>}
      {load.kind === "loading" && <p className="panel-empty" role="status">Loading webhooks…</p>}
      {load.kind === "failed" && (
        <div className="panel-error" role="alert">
          Could not load the webhooks: {load.message}{" "}
          <button type="button" className="btn btn-small" onClick={() => void reload()}>Try again</button>
        </div>
      )}
      {load.kind === "ready" && load.hooks.length === 0 && <p className="panel-empty">No webhooks yet.</p>}
      {load.kind === "ready" && (
        <ul className="webhook-list">
          {load.hooks.map((hook) => (
            <WebhookCard key={hook.id} hook={hook} base={`${base}${hook.id}/`} onChanged={reload} onPin={onPin}
              onRotated={(secret) => setRevealed({ name: hook.name, secret, rotated: true })} />
          ))}
        </ul>
      )}
      {creating && latestVersion !== null && (
        <CreateWebhookDialog base={base} latestVersion={latestVersion} fields={inputFields(inputSchema)} onClose={() => setCreating(false)}
          onCreated={(created) => {
            setCreating(false);
            setRevealed({ name: created.name, url: created.url, secret: created.secret, rotated: false });
            void reload();
          }} />
      )}
      {revealed && <SecretDialog revealed={revealed} onClose={() => setRevealed(null)} />}
      <SchedulesSection graphId={graphId} published={latestVersion !== null} />
    </section>
  );
}

/** A read-only value with a Copy button (the clipboard API, else the selection and execCommand). */
function CopyField({ label, value, id }: { label: string; value: string; id: string }) {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      input.current?.select();
      document.execCommand?.("copy");
    }
    setCopied(true);
  };
  return (
    <div className="copy-field">
      <label htmlFor={id}>{label}</label>
      <div className="copy-field__row">
        <input id={id} ref={input} className="mono" readOnly value={value} onFocus={(e) => e.currentTarget.select()} />
        <button type="button" onClick={() => void copy()} aria-label={`Copy ${label}`}>{copied ? "Copied" : "Copy"}</button>
      </div>
    </div>
  );
}

/** After a create or a rotate: the URL and secret, with the warning that they are shown this once. */
function SecretDialog({ revealed, onClose }: { revealed: Revealed; onClose: () => void }) {
  const title = revealed.rotated ? `New secret for “${revealed.name}”` : `Webhook “${revealed.name}” created`;
  return (
    <Dialog title={title} onClose={onClose} wide>
      <p className="secret-warning" role="note">
        <strong>Copy {revealed.url && revealed.secret ? "the URL and the secret" : revealed.url ? "the URL" : "the secret"} now: you will not see {revealed.url && revealed.secret ? "them" : "it"} again.</strong>{" "}
        Ballast keeps only {revealed.url ? "a hash of the URL's token" : ""}{revealed.url && revealed.secret ? " and " : ""}{revealed.secret ? "an encrypted secret" : ""}.
        {revealed.rotated ? " The old secret stopped working." : " A lost URL means a new webhook; a lost secret can be rotated."}
      </p>
      {revealed.url && <CopyField label="URL" id="webhook-url" value={revealed.url} />}
      {revealed.secret ? (
        <>
          <CopyField label="Secret" id="webhook-secret" value={revealed.secret} />
          <p className="field-help">
            Sign each delivery: <code>X-Ballast-Timestamp</code> (Unix seconds) and <code>X-Ballast-Signature: sha256=</code>
            the hex HMAC-SHA256 of <code>{"<timestamp>.<raw body>"}</code> keyed by the secret.
          </p>
        </>
      ) : (
        <p className="field-help">Unsigned: anyone who has the URL can start runs. Keep it private.</p>
      )}
      <div className="dialog__actions">
        <button type="button" className="button button--primary" onClick={onClose}>I have copied it</button>
      </div>
    </Dialog>
  );
}

/** One webhook: its settings in words, switches and actions, listen, and its recent deliveries. */
function WebhookCard({ hook, base, onChanged, onRotated, onPin }: {
  hook: Webhook; base: string; onChanged: () => Promise<void>; onRotated: (secret: string | null) => void;
  onPin?: (payload: Record<string, unknown> | null) => void;
}) {
  const [confirm, setConfirm] = useState<"rotate" | "delete" | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [showDeliveries, setShowDeliveries] = useState(false);
  const [deliveriesKey, setDeliveriesKey] = useState(0);
  const act = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (err) {
      const fields = err instanceof ApiError ? Object.entries(err.fields).map(([k, v]) => `${k}: ${v.join(" ")}`) : [];
      setError([message(err), ...fields].join(" "));
    } finally {
      setBusy(false);
    }
  };
  const mapping = Object.entries(hook.input_mapping);
  // The switch moves at once; it goes back if the server refuses the change.
  const [enabled, setEnabled] = useState(hook.enabled);
  useEffect(() => setEnabled(hook.enabled), [hook.enabled]);
  const toggle = (next: boolean) => {
    setEnabled(next);
    void act(async () => {
      try {
        await api(base, { method: "PATCH", body: { enabled: next } });
      } catch (err) {
        setEnabled(!next);
        throw err;
      }
      await onChanged();
    });
  };
  return (
    <li className="webhook-card" aria-label={`Webhook ${hook.name}`}>
      <div className="webhook-card__head">
        <strong className="webhook-card__name">{hook.name}</strong>
        <span className={`badge ${enabled ? "badge-ok" : "badge-plain"}`}>{enabled ? "enabled" : "disabled"}</span>
        <label className="switch" title={enabled ? "Disable: deliveries are answered 404 and start nothing" : "Enable: deliveries start runs"}>
          <input type="checkbox" checked={enabled} disabled={busy} aria-label={`Enabled (${hook.name})`}
            onChange={(e) => toggle(e.target.checked)} />
        </label>
      </div>
      <p className="webhook-card__meta">
        Runs {hook.version === null ? "the latest published version" : `version ${hook.version}`} as {hook.run_as} ·{" "}
        {hook.signed ? "signed (HMAC)" : "unsigned"}
      </p>
      <p className="webhook-card__meta">
        Input: {mapping.length === 0 ? "the JSON body" : mapping.map(([f, s]) => `${f} ← ${s === "" ? "(whole body)" : s}`).join(", ")}
      </p>
      <Listen hook={hook} base={base} onPin={onPin} onCaptured={() => setDeliveriesKey((k) => k + 1)} />
      <div className="button-row">
        <button type="button" className="btn btn-small" aria-expanded={showDeliveries} onClick={() => setShowDeliveries(!showDeliveries)}>
          {showDeliveries ? "Hide deliveries" : "Deliveries"}
        </button>
        {hook.signed && <button type="button" className="btn btn-small" onClick={() => setConfirm("rotate")}>Rotate secret</button>}
        <button type="button" className="btn btn-small btn-danger-ghost" onClick={() => setConfirm("delete")}>Delete</button>
      </div>
      {confirm && (
        <div className="confirm-box" role="alertdialog" aria-labelledby={`confirm-hook-${hook.id}`}>
          <p id={`confirm-hook-${hook.id}`}>
            {confirm === "rotate"
              ? `Make a new secret for “${hook.name}”? The current one stops working at once; senders must switch to the new one.`
              : `Delete “${hook.name}”? Its URL stops working at once and its delivery log goes; the runs it started stay.`}
          </p>
          <div className="button-row confirm-box__buttons">
            <button type="button" className="btn" onClick={() => setConfirm(null)}>Cancel</button>
            <button type="button" className={`btn ${confirm === "delete" ? "btn-danger" : "btn-primary"}`} disabled={busy}
              onClick={() => void act(async () => {
                if (confirm === "rotate") {
                  const rotated = await api<WebhookCreated>(`${base}rotate-secret/`, { method: "POST" });
                  setConfirm(null);
                  onRotated(rotated.secret);
                } else {
                  await api(base, { method: "DELETE" });
                  setConfirm(null);
                  await onChanged();
                }
              })}>
              {confirm === "rotate" ? "Rotate secret" : "Delete webhook"}
            </button>
          </div>
        </div>
      )}
      {error && <p className="panel-error" role="alert">{error}</p>}
      {showDeliveries && <Deliveries key={deliveriesKey} base={base} onPin={onPin} />}
    </li>
  );
}

/** "Listen for a test event": open a listen, poll until a delivery is captured, then pin its payload. */
function Listen({ hook, base, onPin, onCaptured }: {
  hook: Webhook; base: string; onPin?: (payload: Record<string, unknown> | null) => void; onCaptured: () => void;
}) {
  const [state, setState] = useState<{ until: string; after: number } | null>(null);
  const [left, setLeft] = useState(0);
  const [captured, setCaptured] = useState<Delivery | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [ended, setEnded] = useState(false);
  const pin = useRef(onPin);
  pin.current = onPin;
  const captureRef = useRef(onCaptured);
  captureRef.current = onCaptured;
  // Closing the panel mid-listen stops the listen: nobody would pin what it caught, and a
  // disabled webhook would answer a sender 202 for an event that then goes nowhere.
  const openListen = useRef(false);
  openListen.current = state !== null;
  useEffect(() => () => {
    if (openListen.current) void api(`${base}listen/`, { method: "DELETE" }).catch(() => undefined);
  }, [base]);

  useEffect(() => {
    if (!state) return;
    let live = true;
    let timer = 0;
    const poll = async () => {
      try {
        const now = await api<ListenState>(`${base}listen/?after=${state.after}`);
        if (!live) return;
        if (now.delivery) {
          setCaptured(now.delivery);
          setState(null);
          if (now.delivery.payload) pin.current?.(now.delivery.payload);
          captureRef.current();
          return;
        }
        if (!now.listening) { setState(null); setEnded(true); return; }
      } catch (err) {
        if (!live) return;
        setError(message(err));
      }
      setLeft(secondsLeft(state.until));
      timer = window.setTimeout(() => void poll(), POLL_MS);
    };
    timer = window.setTimeout(() => void poll(), POLL_MS);
    return () => { live = false; window.clearTimeout(timer); };
  }, [state, base]);

  const start = async () => {
    setError(null);
    setCaptured(null);
    setEnded(false);
    try {
      const opened = await api<ListenState>(`${base}listen/`, { method: "POST", body: { seconds: LISTEN_SECONDS } });
      setLeft(secondsLeft(opened.listening_until));
      setState({ until: opened.listening_until ?? new Date().toISOString(), after: opened.after });
    } catch (err) {
      setError(message(err));
    }
  };
  const stop = async () => {
    setState(null);
    try { await api(`${base}listen/`, { method: "DELETE" }); } catch (err) { setError(message(err)); }
  };

  return (
    <div className="listen" aria-label={`Listen (${hook.name})`} role="group">
      {state ? (
        <div className="listen__waiting" role="status">
          <span className="spinner" aria-hidden="true" />
          <span>Listening for the next delivery… {clock(left)} left</span>
          <button type="button" className="btn btn-small" onClick={() => void stop()}>Stop</button>
        </div>
      ) : (
        <button type="button" className="btn btn-small" disabled={!onPin}
          title={onPin ? "Wait up to two minutes for the next delivery and pin its input as the draft's test input" : "Open the draft to pin test input"}
          onClick={() => void start()}>
          Listen for test event
        </button>
      )}
      {state && (
        <p className="field-help">
          Send a POST to this webhook's URL now.{" "}
          {hook.enabled ? "It also starts a run as usual." : "It is disabled, so the delivery is captured without starting a run."}
        </p>
      )}
      {ended && <p className="field-help" role="status">No delivery arrived; the listen ended.</p>}
      {captured && (
        <div className="listen__captured" role="status">
          <p>
            Captured a delivery {timeAgo(captured.received_at)}
            {captured.run !== null ? <> (it started <a href={`/runs/${captured.run}/`}>run #{captured.run}</a>)</> : null}
            {captured.error ? <> (refused: {captured.error.message ?? captured.error.code})</> : null}
            {captured.payload ? "; its input is pinned as the draft's test input." : "."}
          </p>
        </div>
      )}
      {error && <p className="panel-error" role="alert">{error}</p>}
    </div>
  );
}

/** The webhook's latest deliveries, refreshed every two seconds while shown; a captured one can be pinned again. */
function Deliveries({ base, onPin }: { base: string; onPin?: (payload: Record<string, unknown> | null) => void }) {
  const [rows, setRows] = useState<Delivery[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    let timer = 0;
    const load = async () => {
      try {
        const page = await api<Page<Delivery>>(`${base}deliveries/?page_size=${DELIVERIES_SHOWN}`);
        if (live) { setRows(page.results); setError(null); }
      } catch (err) {
        if (live) setError(message(err));
      }
      if (live) timer = window.setTimeout(() => void load(), POLL_MS * 2);
    };
    void load();
    return () => { live = false; window.clearTimeout(timer); };
  }, [base]);
  if (error && rows === null) return <p className="panel-error" role="alert">Could not load the deliveries: {error}</p>;
  if (rows === null) return <p className="panel-empty" role="status">Loading deliveries…</p>;
  if (rows.length === 0) return <p className="panel-empty">No deliveries yet.</p>;
  return (
    <table className="deliveries" aria-label="Recent deliveries">
      <thead>
        <tr><th scope="col">When</th><th scope="col">Status</th><th scope="col">Outcome</th></tr>
      </thead>
      <tbody>
        {rows.map((d) => (
          <tr key={d.id}>
            <td><time dateTime={d.received_at} title={`${new Date(d.received_at).toLocaleString()}${d.delivery_id ? ` · id ${d.delivery_id}` : ""}`}>{timeAgo(d.received_at)}</time></td>
            <td><span className={`badge ${d.status_code < 300 ? "badge-ok" : "badge-bad"}`}>{d.status_code}</span></td>
            <td>
              {d.run !== null ? <a href={`/runs/${d.run}/`}>{deliveryOutcome(d)}</a> : <span className="muted">{deliveryOutcome(d)}</span>}
              {d.payload && onPin && (
                <>{" "}<button type="button" className="link-button" title="Pin this delivery's input as the draft's test input" onClick={() => onPin(d.payload)}>Pin input</button></>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const FORM_FIELDS = ["name", "version", "signed", "enabled", "input_mapping"] as const;

/** The create form: name, version (latest or a pinned one), signature, input mapping, enabled. Field errors under their fields. */
function CreateWebhookDialog({ base, latestVersion, fields, onClose, onCreated }: {
  base: string; latestVersion: number; fields: string[]; onClose: () => void; onCreated: (created: WebhookCreated) => void;
}) {
  const [name, setName] = useState("");
  const [version, setVersion] = useState<string>("latest");
  const [signed, setSigned] = useState(true);
  const [enabled, setEnabled] = useState(true);
  const [rows, setRows] = useState<MappingRow[]>([]);
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<{ byField: Record<string, string>; rest: string[] }>({ byField: {}, rest: [] });
  const submit = async () => {
    setBusy(true);
    setErrors({ byField: {}, rest: [] });
    try {
      const created = await api<WebhookCreated>(base, {
        method: "POST",
        body: { name, version: version === "latest" ? null : Number(version), signed, enabled, input_mapping: mappingFromRows(rows) },
      });
      onCreated(created);
    } catch (err) {
      if (err instanceof ApiError && Object.keys(err.fields).length > 0) {
        const split = splitFieldErrors(err.fields, FORM_FIELDS);
        setErrors({ byField: split.byField, rest: [err.message, ...split.rest] });
      } else {
        setErrors({ byField: {}, rest: [message(err)] });
      }
      setBusy(false);
    }
  };
  const fieldError = (key: string) => errors.byField[key] ? <p className="field-error" id={`hook-${key}-error`}>{errors.byField[key]}</p> : null;
  const versions = Array.from({ length: latestVersion }, (_, i) => latestVersion - i);
  // Mapping errors for a field no row names (a required field left out) are shown under the mapping.
  const unplaced = Object.entries(errors.byField).filter(([k]) => k.startsWith("input_mapping.") && !rows.some((r) => `input_mapping.${r.field.trim()}` === k));
  return (
    <Dialog title="New webhook" onClose={onClose} wide>
      <form className="webhook-form" onSubmit={(e) => { e.preventDefault(); void submit(); }} noValidate>
        <div className="field">
          <label htmlFor="hook-name">Name</label>
          <input id="hook-name" value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. orders" maxLength={100}
            aria-invalid={errors.byField.name ? true : undefined} aria-describedby={errors.byField.name ? "hook-name-error" : undefined} />
          {fieldError("name")}
        </div>
        <div className="field">
          <label htmlFor="hook-version">Version</label>
          <select id="hook-version" value={version} onChange={(e) => setVersion(e.target.value)} aria-invalid={errors.byField.version ? true : undefined}>
            <option value="latest">Latest published (follows each publish)</option>
            {versions.map((n) => <option key={n} value={String(n)}>Version {n} (pinned)</option>)}
          </select>
          {fieldError("version")}
        </div>
        <label className="checkbox-field">
          <input type="checkbox" checked={signed} onChange={(e) => setSigned(e.target.checked)} />
          <span>Require a signature (HMAC-SHA256 with a secret shown once)</span>
        </label>
        {fieldError("signed")}
        <fieldset className="mapping">
          <legend>Input mapping</legend>
          <p className="field-help">
            Empty: the JSON body is the run input. Else each input field takes a JSON pointer into the body
            (<code>/order/id</code>, empty for the whole body) or a header (<code>header:X-Event</code>).
          </p>
          {rows.map((row, i) => (
            <div className="mapping__row" key={i}>
              <input aria-label={`Input field ${i + 1}`} list="hook-input-fields" value={row.field} placeholder="input field"
                onChange={(e) => setRows(rows.map((r, j) => (j === i ? { ...r, field: e.target.value } : r)))}
                aria-invalid={errors.byField[`input_mapping.${row.field.trim()}`] ? true : undefined} />
              <span aria-hidden="true">←</span>
              <input aria-label={`Source ${i + 1}`} className="mono" value={row.source} placeholder="/body/pointer or header:Name"
                onChange={(e) => setRows(rows.map((r, j) => (j === i ? { ...r, source: e.target.value } : r)))} />
              <button type="button" className="icon-button" aria-label={`Remove mapping ${i + 1}`} onClick={() => setRows(rows.filter((_, j) => j !== i))}>×</button>
              {errors.byField[`input_mapping.${row.field.trim()}`] && <p className="field-error mapping__error">{errors.byField[`input_mapping.${row.field.trim()}`]}</p>}
            </div>
          ))}
          <datalist id="hook-input-fields">{fields.map((f) => <option key={f} value={f} />)}</datalist>
          <button type="button" onClick={() => setRows([...rows, { field: rows.length === 0 && fields[0] ? fields[0] : "", source: "" }])}>+ Map a field</button>
          {fieldError("input_mapping")}
          {unplaced.map(([k, v]) => <p key={k} className="field-error">{k.slice("input_mapping.".length)}: {v}</p>)}
        </fieldset>
        <label className="checkbox-field">
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} />
          <span>Enabled (deliveries start runs; a disabled webhook answers 404)</span>
        </label>
        {errors.rest.length > 0 && <div role="alert" className="panel-error">{errors.rest.map((line, i) => <p key={i}>{line}</p>)}</div>}
        <div className="dialog__actions">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" className="button button--primary" disabled={busy}>{busy ? "Creating…" : "Create webhook"}</button>
        </div>
      </form>
    </Dialog>
  );
}

export default TriggersPanel;
