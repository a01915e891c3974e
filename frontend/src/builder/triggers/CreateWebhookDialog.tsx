// The New webhook dialog of the Triggers panel: name, pinned version, signing, enabled and the input mapping; the answer shows the URL and secret once.
import type { WebhookCreated } from "../../api/types";
import { useState } from "react";
import { api, ApiError } from "../../lib/api";
import { Dialog } from "../Dialog";
import { failureText, mappingFromRows, splitFieldErrors, type MappingRow } from "./webhooks";
import { Button } from "../../shell/Button";

const FORM_FIELDS = ["name", "version", "signed", "enabled", "input_mapping"] as const;

/** The create form: name, version (latest or a pinned one), signature, input mapping, enabled. Field errors under their fields. */
export function CreateWebhookDialog({ base, latestVersion, fields, onClose, onCreated }: {
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
        setErrors({ byField: {}, rest: [failureText(err)] });
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
              <Button variant="ghost" icon aria-label={`Remove mapping ${i + 1}`} onClick={() => setRows(rows.filter((_, j) => j !== i))}>×</Button>
              {errors.byField[`input_mapping.${row.field.trim()}`] && <p className="field-error mapping__error">{errors.byField[`input_mapping.${row.field.trim()}`]}</p>}
            </div>
          ))}
          <datalist id="hook-input-fields">{fields.map((f) => <option key={f} value={f} />)}</datalist>
          <Button size="small" onClick={() => setRows([...rows, { field: rows.length === 0 && fields[0] ? fields[0] : "", source: "" }])}>+ Map a field</Button>
          {fieldError("input_mapping")}
          {unplaced.map(([k, v]) => <p key={k} className="field-error">{k.slice("input_mapping.".length)}: {v}</p>)}
        </fieldset>
        <label className="checkbox-field">
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} />
          <span>Enabled (deliveries start runs; a disabled webhook answers 404)</span>
        </label>
        {errors.rest.length > 0 && <div role="alert" className="panel-error">{errors.rest.map((line, i) => <p key={i}>{line}</p>)}</div>}
        <div className="dialog__actions">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy}>{busy ? "Creating…" : "Create webhook"}</Button>
        </div>
      </form>
    </Dialog>
  );
}
