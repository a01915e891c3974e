// /providers/ (staff): the LLM providers nodes may name; add one with its key (stored encrypted, never shown again), test its connection, rotate its key, remove it.
import type { ConnectionResult, ProviderRow } from "../api/types";
import { useState, type FormEvent, type ReactNode } from "react";
import { api, ApiError } from "../lib/api";
import { ErrorMessage, Loading, Modal, PageHeader, Skeleton } from "../shell/ui";
import { useApi } from "../shell/useApi";
import "./admin.css";
import { Button } from "../shell/Button";
import { ConfirmDialog } from "../shell/ConfirmDialog";
import { useConnectionTests, type ConnectionTest } from "../shell/useConnectionTests";

const KINDS: readonly { value: string; label: string }[] = [
  { value: "openai", label: "OpenAI" },
  { value: "anthropic", label: "Anthropic" },
  { value: "openai_compatible", label: "OpenAI-compatible server (vLLM, Ollama, LiteLLM…)" },
];

const SOURCES: Readonly<Record<ProviderRow["source"], string>> = {
  settings: "settings.py",
  environment: "environment",
  app: "added here",
};

function fieldError(error: unknown, field: string): string | undefined {
  return error instanceof ApiError ? error.fields[field]?.join(" ") : undefined;
}

/** Whether the row's key is set, as a badge: a provider that needs none says so. */
export function KeyBadge({ provider }: { provider: ProviderRow }) {
  if (provider.kind === "mock") return <span className="muted small nowrap">none needed</span>;
  // A server of one's own may take no key at all: the catalogue cannot say whether one is stored.
  if (provider.kind === "openai_compatible") return <span className="muted small nowrap">optional</span>;
  if (provider.ready) return <span className="badge badge-ok">Key set</span>;
  return <span className="badge badge-wait" title="Nodes naming it fail until a key is set">No key</span>;
}

export function AddProviderDialog({ onClose, onDone }: { onClose: () => void; onDone: () => void }) {
  const [name, setName] = useState("");
  const [kind, setKind] = useState("openai");
  const [baseUrl, setBaseUrl] = useState("");
  const [apiKey, setApiKey] = useState("");
  const [defaultModel, setDefaultModel] = useState("");
  const [models, setModels] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const list = models.split(/[\s,]+/).map((m) => m.trim()).filter(Boolean);
      await api("providers/", {
        method: "POST",
        body: { name: name.trim(), kind, base_url: baseUrl.trim(), api_key: apiKey, default_model: defaultModel.trim(), ...(list.length ? { models: list } : {}) },
      });
      onDone();
      onClose();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  const field = (id: string, f: string, label: string, input: ReactNode, help?: string) => (
    <div className={`field${fieldError(error, f) ? " field-invalid" : ""}`}>
      <label htmlFor={id}>{label}</label>
      {input}
      {help ? <p className="field-help">{help}</p> : null}
      {fieldError(error, f) ? <div className="field-error" role="alert">{fieldError(error, f)}</div> : null}
    </div>
  );
  const known = ["name", "kind", "base_url", "api_key", "default_model", "models"];
  const other = error && !(error instanceof ApiError && Object.keys(error.fields).some((f) => known.includes(f)));
  return (
    <Modal title="Add an LLM provider" onClose={onClose}>
      <form onSubmit={submit} className="form">
        {field("provider-name", "name", "Name",
          <input id="provider-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={64} autoFocus placeholder="e.g. openai-team" autoComplete="off" />,
          "What an LLM node writes as its provider.")}
        {field("provider-kind", "kind", "Kind",
          <select id="provider-kind" value={kind} onChange={(e) => setKind(e.target.value)}>
            {KINDS.map((k) => <option key={k.value} value={k.value}>{k.label}</option>)}
          </select>)}
        {field("provider-base-url", "base_url", kind === "openai_compatible" ? "Base URL" : "Base URL (optional)",
          <input id="provider-base-url" value={baseUrl} onChange={(e) => setBaseUrl(e.target.value)} maxLength={500} required={kind === "openai_compatible"}
            placeholder={kind === "openai_compatible" ? "http://127.0.0.1:11434/v1" : "the vendor's own"} autoComplete="off" />)}
        {field("provider-key", "api_key", kind === "openai_compatible" ? "API key (if the server asks for one)" : "API key",
          <input id="provider-key" type="password" value={apiKey} onChange={(e) => setApiKey(e.target.value)} maxLength={1000} autoComplete="off" />,
          "Stored encrypted; it is never shown again, not even to you.")}
        {field("provider-default-model", "default_model", "Default model",
          <input id="provider-default-model" value={defaultModel} onChange={(e) => setDefaultModel(e.target.value)} required maxLength={200} autoComplete="off"
            placeholder={kind === "anthropic" ? "claude-sonnet-4-5" : "gpt-4o-mini"} />)}
        {field("provider-models", "models", "Models offered (optional)",
          <input id="provider-models" value={models} onChange={(e) => setModels(e.target.value)} autoComplete="off" placeholder="comma separated; empty: any model" />)}
        {other ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || !name.trim() || !defaultModel.trim()}>{busy ? "Adding…" : "Add provider"}</Button>
        </div>
      </form>
    </Modal>
  );
}

function RotateDialog({ provider, onClose, onDone }: { provider: ProviderRow; onClose: () => void; onDone: () => void }) {
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api(`providers/${encodeURIComponent(provider.name)}/`, { method: "PATCH", body: { api_key: key } });
      onDone();
      onClose();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <Modal title={`New API key for ${provider.name}`} onClose={onClose}>
      <form onSubmit={submit} className="form">
        <p>Steps that start from now on use the new key; the old one is discarded here (revoke it at the vendor too).</p>
        <div className={`field${fieldError(error, "api_key") ? " field-invalid" : ""}`}>
          <label htmlFor="rotate-key">New API key</label>
          <input id="rotate-key" type="password" value={key} onChange={(e) => setKey(e.target.value)} required maxLength={1000} autoComplete="off" autoFocus />
          {fieldError(error, "api_key") ? <div className="field-error" role="alert">{fieldError(error, "api_key")}</div> : null}
        </div>
        {error && !fieldError(error, "api_key") ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || key === ""}>{busy ? "Saving…" : "Replace key"}</Button>
        </div>
      </form>
    </Modal>
  );
}

/** The outcome of a connection test under its provider's row. */
function TestOutcome({ result }: { result: ConnectionTest<ConnectionResult> }) {
  if (result === "testing") return <Loading label="Testing the connection…" />;
  if (result instanceof Error) return <span className="field-error">{result.message}</span>;
  return (
    <span role="status" className={result.ok ? "test-ok" : "test-failed"}>
      {result.ok ? "Connected" : "Failed"} · <code>{result.model}</code> · {result.latency_ms} ms{result.message ? ` · ${result.message}` : ""}
    </span>
  );
}

export default function Providers() {
  const list = useApi<ProviderRow[]>("providers/");
  const [adding, setAdding] = useState(false);
  const [rotating, setRotating] = useState<ProviderRow | null>(null);
  const [removing, setRemoving] = useState<ProviderRow | null>(null);
  const { tests, test } = useConnectionTests<ConnectionResult>("providers");
  const providers = list.data ?? [];
  return (
    <main className="page admin-page">
      <PageHeader
        title="LLM providers"
        subtitle="The providers LLM and agent nodes may name. Keys are stored encrypted and never shown again; providers from settings or the environment are changed there."
        actions={<Button variant="primary" onClick={() => setAdding(true)}>Add provider</Button>}
      />
      <section className="card">
        {list.error ? <ErrorMessage error={list.error} onRetry={list.reload} /> : null}
        {list.loading && !list.data ? <Skeleton lines={4} variant="table" /> : null}
        {providers.length > 0 ? (
          <div className="table-wrap">
            <table className="table" aria-label="LLM providers">
              <thead>
                <tr>
                  <th scope="col">Provider</th>
                  <th scope="col">Default model</th>
                  <th scope="col">Configured in</th>
                  <th scope="col">Key</th>
                  <th scope="col"><span className="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                {providers.map((p) => (
                  <tr key={p.name}>
                    <td>
                      <strong>{p.name}</strong>
                      <div className="muted small">{p.label}{p.base_url ? ` · ${p.base_url}` : ""}</div>
                      {tests[p.name] ? <div className="small"><TestOutcome result={tests[p.name]!} /></div> : null}
                    </td>
                    <td>
                      {p.default_model ? <code>{p.default_model}</code> : <span className="muted">—</span>}
                      {p.models.length ? <div className="muted small">{p.models.length} model{p.models.length === 1 ? "" : "s"} offered</div> : null}
                    </td>
                    <td>{SOURCES[p.source]}</td>
                    <td><KeyBadge provider={p} /></td>
                    <td className="num nowrap">
                      <Button size="small" onClick={() => test(p.name)} disabled={tests[p.name] === "testing"} aria-label={`Test connection of ${p.name}`}>Test connection</Button>
                      {p.source === "app" ? (
                        <>
                          {" "}<Button size="small" onClick={() => setRotating(p)} aria-label={`Rotate key of ${p.name}`}>{p.kind === "openai_compatible" ? "Change key" : p.ready ? "Rotate key" : "Set key"}</Button>
                          {" "}<Button variant="danger-ghost" size="small" onClick={() => setRemoving(p)} aria-label={`Remove ${p.name}`}>Remove</Button>
                        </>
                      ) : null}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </section>
      {adding ? <AddProviderDialog onClose={() => setAdding(false)} onDone={list.reload} /> : null}
      {rotating ? <RotateDialog provider={rotating} onClose={() => setRotating(null)} onDone={list.reload} /> : null}
      {removing ? (
        <ConfirmDialog title={`Remove ${removing.name}?`} action="Remove provider" busy="Removing…"
          act={() => api(`providers/${encodeURIComponent(removing.name)}/`, { method: "DELETE" })}
          onClose={() => setRemoving(null)} onDone={() => { setRemoving(null); list.reload(); }}>
          <p>LLM nodes that name <code>{removing.name}</code> fail validation until they name another provider. Its key is deleted.</p>
        </ConfirmDialog>
      ) : null}
    </main>
  );
}
