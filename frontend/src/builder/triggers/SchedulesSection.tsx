// The graph's schedules in the Triggers panel: each with its next fire times, Pause/Resume and Run now; a form to add one.
import { useCallback, useEffect, useState, type ReactElement } from "react";
import { api, ApiError } from "../../lib/api";
import { Dialog } from "../Dialog";
import { fireTime, parseInput, scheduleFieldErrors, type Schedule } from "./schedules";

type Load = { kind: "loading" } | { kind: "failed"; message: string } | { kind: "ready"; items: Schedule[] };

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The schedules of graph ``graphId``; ``published``: whether it has a published version to run. */
export function SchedulesSection({ graphId, published }: { graphId: number; published: boolean }) {
  const base = `graphs/${graphId}/schedules/`;
  const [load, setLoad] = useState<Load>({ kind: "loading" });
  const [creating, setCreating] = useState(false);
  const reload = useCallback(async () => {
    try {
      setLoad({ kind: "ready", items: await api<Schedule[]>(base) });
    } catch (err) {
      setLoad({ kind: "failed", message: message(err) });
    }
  }, [base]);
  useEffect(() => { void reload(); }, [reload]);
  return (
    <section className="schedules" aria-label="Schedules">
      <h3 className="schedules__title">Schedules</h3>
      <p className="field-help">A schedule starts a run on a cron expression in a time zone, with the same input each time.</p>
      <div className="button-row">
        <button type="button" className="btn btn-primary" disabled={!published} onClick={() => setCreating(true)}
          title={published ? "Add a schedule that starts runs" : "Publish the graph first: a schedule runs a published version"}>
          New schedule
        </button>
      </div>
      {load.kind === "loading" && <p className="panel-empty" role="status">Loading schedules…</p>}
      {load.kind === "failed" && (
        <div className="panel-error" role="alert">
          Could not load the schedules: {load.message}{" "}
          <button type="button" className="btn btn-small" onClick={() => void reload()}>Try again</button>
        </div>
      )}
      {load.kind === "ready" && load.items.length === 0 && <p className="panel-empty">No schedules yet.</p>}
      {load.kind === "ready" && load.items.length > 0 && (
        <ul className="webhook-list">
          {load.items.map((s) => <ScheduleCard key={s.id} schedule={s} base={`${base}${s.id}/`} onChanged={reload} />)}
        </ul>
      )}
      {creating && <CreateScheduleDialog base={base} onClose={() => setCreating(false)} onCreated={() => { setCreating(false); void reload(); }} />}
    </section>
  );
}

/** One schedule: what it runs, when next, Pause/Resume and Run now. */
function ScheduleCard({ schedule, base, onChanged }: { schedule: Schedule; base: string; onChanged: () => Promise<void> }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [started, setStarted] = useState<number | null>(null);
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
  const toggle = () => act(async () => {
    await api(`${base}${schedule.paused ? "resume" : "pause"}/`, { method: "POST" });
    await onChanged();
  });
  const runNow = () => act(async () => {
    const made = await api<{ run: number }>(`${base}run-now/`, { method: "POST" });
    setStarted(made.run);
    await onChanged();
  });
  return (
    <li className="webhook-card" aria-label={`Schedule ${schedule.name}`}>
      <div className="webhook-card__head">
        <strong className="webhook-card__name">{schedule.name}</strong>
        <span className={`badge ${schedule.paused ? "badge-plain" : "badge-ok"}`}>{schedule.paused ? "paused" : "active"}</span>
      </div>
      <p className="webhook-card__meta">
        <code>{schedule.cron}</code> in {schedule.timezone} · runs {schedule.version === null ? "the latest published version" : `version ${schedule.version}`} as {schedule.run_as}
      </p>
      <p className="webhook-card__meta">Input: <code>{JSON.stringify(schedule.input)}</code></p>
      {schedule.paused ? (
        <p className="webhook-card__meta">Paused: no tick fires until it is resumed.</p>
      ) : (
        <div className="webhook-card__meta">
          Next fire times:
          <ol className="fire-times" aria-label={`Next fire times of ${schedule.name}`}>
            {schedule.next_fire_times.map((t) => <li key={t}><time dateTime={t}>{fireTime(t)}</time></li>)}
          </ol>
        </div>
      )}
      <div className="button-row">
        <button type="button" className="btn btn-small" disabled={busy} onClick={() => void toggle()}>{schedule.paused ? "Resume" : "Pause"}</button>
        <button type="button" className="btn btn-small" disabled={busy} onClick={() => void runNow()}>Run now</button>
      </div>
      {started !== null && <p className="webhook-card__meta" role="status">Started <a href={`/runs/${started}/`}>run #{started}</a>.</p>}
      {error && <p className="panel-error" role="alert">{error}</p>}
    </li>
  );
}

/** The form of a new schedule; the server's refusals are shown under their fields. */
function CreateScheduleDialog({ base, onClose, onCreated }: { base: string; onClose: () => void; onCreated: () => void }) {
  const [name, setName] = useState("");
  const [cron, setCron] = useState("0 9 * * MON-FRI");
  const [timezone, setTimezone] = useState(() => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC");
  const [input, setInput] = useState("{}");
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<{ byField: Record<string, string>; rest: string[] }>({ byField: {}, rest: [] });
  const submit = async () => {
    const parsed = parseInput(input);
    if ("error" in parsed) {
      setErrors({ byField: { input: parsed.error }, rest: [] });
      return;
    }
    setBusy(true);
    try {
      await api(base, { method: "POST", body: { name, cron, timezone, input: parsed.value } });
      onCreated();
    } catch (err) {
      setErrors(err instanceof ApiError && Object.keys(err.fields).length > 0 ? scheduleFieldErrors(err.fields) : { byField: {}, rest: [message(err)] });
    } finally {
      setBusy(false);
    }
  };
  const field = (key: string, label: string, control: ReactElement, help?: string) => (
    <div className="field">
      <label htmlFor={`schedule-${key}`}>{label}</label>
      {control}
      {help && <p className="field-help">{help}</p>}
      {errors.byField[key] && <p className="field-error" id={`schedule-${key}-error`}>{errors.byField[key]}</p>}
    </div>
  );
  const invalid = (key: string) => ({ "aria-invalid": errors.byField[key] ? true : undefined, "aria-describedby": errors.byField[key] ? `schedule-${key}-error` : undefined });
  return (
    <Dialog title="New schedule" onClose={onClose} wide>
      <form className="webhook-form" onSubmit={(e) => { e.preventDefault(); void submit(); }} noValidate>
        {field("name", "Name", <input id="schedule-name" value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. nightly" maxLength={100} {...invalid("name")} />)}
        {field("cron", "Cron expression", <input id="schedule-cron" className="mono" value={cron} onChange={(e) => setCron(e.target.value)} {...invalid("cron")} />,
          "Five fields: minute hour day-of-month month day-of-week, e.g. 30 2 * * * (02:30 daily).")}
        {field("timezone", "Time zone", <input id="schedule-timezone" value={timezone} onChange={(e) => setTimezone(e.target.value)} {...invalid("timezone")} />,
          "An IANA name such as Europe/Paris or UTC.")}
        {field("input", "Run input (JSON)", <textarea id="schedule-input" className="mono" rows={4} value={input} onChange={(e) => setInput(e.target.value)} {...invalid("input")} />,
          "Checked against the input schema of the published version.")}
        {errors.rest.length > 0 && <div role="alert" className="panel-error">{errors.rest.map((line, i) => <p key={i}>{line}</p>)}</div>}
        <div className="dialog__actions">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" className="button button--primary" disabled={busy}>{busy ? "Creating…" : "Create schedule"}</button>
        </div>
      </form>
    </Dialog>
  );
}
