// The graph's Triggers: its webhooks (create, URL and secret shown once, enable, rotate, delete), their deliveries, and "listen for a test event"; then its schedules and completion callbacks.
import type { Delivery, ListenState, Webhook, WebhookCreated } from "../../api/types";
import { useEffect, useRef, useState } from "react";
import { api, ApiError } from "../../lib/api";
import { Dialog } from "../Dialog";
import { timeAgo } from "../versions/VersionsPanel";
import { clock, failureText, inputFields, POLL_MS, secondsLeft } from "./webhooks";
import { CreateWebhookDialog } from "./CreateWebhookDialog";
import { Deliveries } from "./Deliveries";
import "../panel/panel.css";
import { SchedulesSection } from "./SchedulesSection";
import { CallbacksSection } from "./CallbacksSection";
import { useListLoad } from "./useListLoad";
import "./triggers.css";
import { Button } from "../../shell/Button";

/** How long a listen waits for a delivery, in seconds (the server allows up to 600). */
export const LISTEN_SECONDS = 120;

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

/** The secret (and URL) to show once, after a create or a rotate. */
interface Revealed {
  name: string;
  url?: string;
  secret: string | null;
  rotated: boolean;
}

/** The right-hand panel listing the graph's webhooks. */
export function TriggersPanel({ graphId, latestVersion, inputSchema, testInput, onPin }: TriggersPanelProps) {
  const base = `graphs/${graphId}/webhooks/`;
  const { load, reload } = useListLoad<Webhook>(base);
  const [creating, setCreating] = useState(false);
  const [revealed, setRevealed] = useState<Revealed | null>(null);

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
            {onPin && <Button variant="link" onClick={() => onPin(null)}>Unpin</Button>}
          </div>
          <pre className="test-output">{JSON.stringify(testInput, null, 2)}</pre>
          <p className="field-help">The Run dialog starts with this input.</p>
        </div>
      )}
      <div className="button-row">
        <Button variant="primary" disabled={latestVersion === null} onClick={() => setCreating(true)}
          title={latestVersion === null ? "Publish the graph first: a webhook runs a published version" : "Add a webhook URL that starts runs"}>
          New webhook
        </Button>
      </div>
      {latestVersion === null && <p className="field-help">Publish the graph first: webhooks run a published version.</p>}
      {load.kind === "loading" && <p className="panel-empty" role="status">Loading webhooks…</p>}
      {load.kind === "failed" && (
        <div className="panel-error" role="alert">
          Could not load the webhooks: {load.message}{" "}
          <Button size="small" onClick={() => void reload()}>Try again</Button>
        </div>
      )}
      {load.kind === "ready" && load.items.length === 0 && <p className="panel-empty">No webhooks yet.</p>}
      {load.kind === "ready" && (
        <ul className="webhook-list">
          {load.items.map((hook) => (
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
      <SchedulesSection graphId={graphId} latestVersion={latestVersion} />
      <CallbacksSection graphId={graphId} />
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
        <Button size="small" onClick={() => void copy()} aria-label={`Copy ${label}`}>{copied ? "Copied" : "Copy"}</Button>
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
        <Button variant="primary" onClick={onClose}>I have copied it</Button>
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
      setError([failureText(err), ...fields].join(" "));
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
        <Button size="small" aria-expanded={showDeliveries} onClick={() => setShowDeliveries(!showDeliveries)}>
          {showDeliveries ? "Hide deliveries" : "Deliveries"}
        </Button>
        {hook.signed && <Button size="small" onClick={() => setConfirm("rotate")}>Rotate secret</Button>}
        <Button variant="danger-ghost" size="small" onClick={() => setConfirm("delete")}>Delete</Button>
      </div>
      {confirm && (
        <div className="confirm-box" role="alertdialog" aria-labelledby={`confirm-hook-${hook.id}`}>
          <p id={`confirm-hook-${hook.id}`}>
            {confirm === "rotate"
              ? `Make a new secret for “${hook.name}”? The current one stops working at once; senders must switch to the new one.`
              : `Delete “${hook.name}”? Its URL stops working at once and its delivery log goes; the runs it started stay.`}
          </p>
          <div className="button-row confirm-box__buttons">
            <Button onClick={() => setConfirm(null)}>Cancel</Button>
            <Button variant={confirm === "delete" ? "danger" : "primary"} disabled={busy}
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
            </Button>
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
        setError(failureText(err));
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
      setError(failureText(err));
    }
  };
  const stop = async () => {
    setState(null);
    try { await api(`${base}listen/`, { method: "DELETE" }); } catch (err) { setError(failureText(err)); }
  };

  return (
    <div className="listen" aria-label={`Listen (${hook.name})`} role="group">
      {state ? (
        <div className="listen__waiting" role="status">
          <span className="spinner" aria-hidden="true" />
          <span>Listening for the next delivery… {clock(left)} left</span>
          <Button size="small" onClick={() => void stop()}>Stop</Button>
        </div>
      ) : (
        <Button size="small" disabled={!onPin}
          title={onPin ? "Wait up to two minutes for the next delivery and pin its input as the draft's test input" : "Open the draft to pin test input"}
          onClick={() => void start()}>
          Listen for test event
        </Button>
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

export default TriggersPanel;
