// The graph's schedules in the Triggers panel: each with its next fire times, Pause/Resume, Run now, an edit form and its tick log; a form to add one.
import type { Page, ScheduleRunNow } from "../../api/types";
import { useEffect, useState, type ReactElement } from "react";
import { api, ApiError } from "../../lib/api";
import { Dialog } from "../Dialog";
import { timeAgo } from "../versions/VersionsPanel";
import {
  duration, fireTime, scheduleBody, tickTime, scheduleDraft, scheduleFieldErrors, tickError, TICK_OUTCOMES,
  type Schedule, type ScheduleDraft, type ScheduleTick,
} from "./schedules";
import { useListLoad } from "./useListLoad";
import { failureText, POLL_MS } from "./webhooks";
import { Button } from "../../shell/Button";

/** Ticks shown a page of the tick log. */
export const TICKS_SHOWN = 10;

/** The schedules of graph ``graphId``; ``latestVersion``: its newest published version (null: nothing published, nothing to run). */
export function SchedulesSection({ graphId, latestVersion }: { graphId: number; latestVersion: number | null }) {
  const base = `graphs/${graphId}/schedules/`;
  const { load, reload } = useListLoad<Schedule>(base);
  const [creating, setCreating] = useState(false);
  const published = latestVersion !== null;
  return (
    <section className="schedules" aria-label="Schedules">
      <h3 className="schedules__title">Schedules</h3>
      <p className="field-help">A schedule starts a run on a cron expression in a time zone, with the same input each time.</p>
      <div className="button-row">
        <Button variant="primary" disabled={!published} onClick={() => setCreating(true)}
          title={published ? "Add a schedule that starts runs" : "Publish the graph first: a schedule runs a published version"}>
          New schedule
        </Button>
      </div>
      {load.kind === "loading" && <p className="panel-empty" role="status">Loading schedules…</p>}
      {load.kind === "failed" && (
        <div className="panel-error" role="alert">
          Could not load the schedules: {load.message}{" "}
          <Button size="small" onClick={() => void reload()}>Try again</Button>
        </div>
      )}
      {load.kind === "ready" && load.items.length === 0 && <p className="panel-empty">No schedules yet.</p>}
      {load.kind === "ready" && load.items.length > 0 && (
        <ul className="webhook-list">
          {load.items.map((s) => <ScheduleCard key={s.id} schedule={s} base={`${base}${s.id}/`} latestVersion={latestVersion} onChanged={reload} />)}
        </ul>
      )}
      {creating && <ScheduleDialog base={base} schedule={null} latestVersion={latestVersion} onClose={() => setCreating(false)} onSaved={() => { setCreating(false); void reload(); }} />}
    </section>
  );
}

/** One schedule: what it runs, when next, Pause/Resume, Run now, Edit and its tick log. */
function ScheduleCard({ schedule, base, latestVersion, onChanged }: { schedule: Schedule; base: string; latestVersion: number | null; onChanged: () => Promise<void> }) {
  const [busy, setBusy] = useState(false);
  const [editing, setEditing] = useState(false);
  const [showTicks, setShowTicks] = useState(false);
  // Bumped by Run now: an open tick log reads its first page again at once.
  const [ran, setRan] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const [started, setStarted] = useState<number | null>(null);
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
  const toggle = () => act(async () => {
    await api(`${base}${schedule.paused ? "resume" : "pause"}/`, { method: "POST" });
    await onChanged();
  });
  const runNow = () => act(async () => {
    const made = await api<ScheduleRunNow>(`${base}run-now/`, { method: "POST" });
    setStarted(made.run);
    setRan((n) => n + 1);
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
      <p className="webhook-card__meta">
        Overlap: {schedule.overlap_policy === "allow" ? "start another run" : schedule.overlap_policy === "queue" ? "queue a tick behind the last run" : "skip a tick while the last run is active"} · Missed ticks:{" "}
        {schedule.missed_policy === "catch_up" ? `run the latest once, within ${duration(schedule.catch_up_window_seconds)}` : "skipped"}
      </p>
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
        <Button size="small" disabled={busy} onClick={() => void toggle()}>{schedule.paused ? "Resume" : "Pause"}</Button>
        <Button size="small" disabled={busy} onClick={() => void runNow()}>Run now</Button>
        <Button size="small" disabled={busy} onClick={() => setEditing(true)}>Edit</Button>
        <Button size="small" aria-expanded={showTicks} onClick={() => setShowTicks((v) => !v)}>
          {showTicks ? "Hide tick log" : "Tick log"}
        </Button>
      </div>
      {started !== null && <p className="webhook-card__meta" role="status">Started <a href={`/runs/${started}/`}>run #{started}</a>.</p>}
      {error && <p className="panel-error" role="alert">{error}</p>}
      {showTicks && <TickLog base={base} name={schedule.name} refresh={ran} />}
      {editing && (
        <ScheduleDialog base={base} schedule={schedule} latestVersion={latestVersion} onClose={() => setEditing(false)}
          onSaved={() => { setEditing(false); void onChanged(); }} />
      )}
    </li>
  );
}

/**
 * The ticks of a schedule, newest first (Run nows too), a page at a time: when, what it did,
 * the run it started, the ticks missed before it and its error. Read again every two seconds
 * while shown, and at once when ``refresh`` changes.
 */
export function TickLog({ base, name, refresh }: { base: string; name: string; refresh: number }) {
  const [page, setPage] = useState(1);
  const [data, setData] = useState<Page<ScheduleTick> | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    let timer = 0;
    const load = async () => {
      try {
        const answer = await api<Page<ScheduleTick>>(`${base}ticks/?page=${page}&page_size=${TICKS_SHOWN}`);
        if (live) { setData(answer); setError(null); }
      } catch (err) {
        if (live) setError(failureText(err));
      }
      if (live) timer = window.setTimeout(() => void load(), POLL_MS * 2);
    };
    void load();
    return () => { live = false; window.clearTimeout(timer); };
  }, [base, page, refresh]);
  const pages = data ? Math.max(1, Math.ceil(data.count / TICKS_SHOWN)) : 1;
  return (
    <div className="tick-log" role="region" aria-label={`Tick log of ${name}`}>
      {error && <p className="panel-error" role="alert">Could not load the ticks: {error}</p>}
      {data === null && !error && <p className="panel-empty" role="status">Loading ticks…</p>}
      {data !== null && data.results.length === 0 && <p className="panel-empty">No ticks yet: the first fires at the next fire time, or with Run now.</p>}
      {data !== null && data.results.length > 0 && (
        <table className="deliveries tick-log__table" aria-label={`Ticks of ${name}`}>
          <thead>
            <tr><th scope="col">Tick</th><th scope="col">Outcome</th><th scope="col">Run</th><th scope="col" title="Ticks before this one that no run was started for">Missed</th></tr>
          </thead>
          <tbody>
            {data.results.map((t) => (
              <tr key={t.id}>
                <td>
                  <time dateTime={t.tick_at} title={`Tick ${fireTime(t.tick_at)} · fired ${fireTime(t.fired_at)}`}>{tickTime(t.tick_at)}</time>
                  <div className="muted">{t.manual ? <span className="badge badge-plain">Run now</span> : timeAgo(t.fired_at)}</div>
                </td>
                <td>
                  <span className={`tick-outcome tick-outcome--${t.outcome}`}>{TICK_OUTCOMES[t.outcome] ?? t.outcome}</span>
                  {t.error !== null && t.error !== undefined && <div className="tick-log__error">{tickError(t.error)}</div>}
                </td>
                <td>{t.run !== null ? <a href={`/runs/${t.run}/`}>run #{t.run}</a> : <span className="muted">—</span>}</td>
                <td className="num">{t.missed > 0 ? <strong>{t.missed}</strong> : <span className="muted">0</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data !== null && pages > 1 && (
        <div className="button-row tick-log__pager">
          <Button size="small" disabled={page <= 1} onClick={() => setPage((p) => p - 1)}>Newer</Button>
          <span className="muted">Page {page} of {pages}</span>
          <Button size="small" disabled={page >= pages} onClick={() => setPage((p) => p + 1)}>Older</Button>
        </div>
      )}
    </div>
  );
}

/** The form of a new schedule (``schedule`` null) or of an existing one; the server's refusals are shown under their fields. */
function ScheduleDialog({ base, schedule, latestVersion, onClose, onSaved }: {
  base: string; schedule: Schedule | null; latestVersion: number | null; onClose: () => void; onSaved: () => void;
}) {
  const editing = schedule !== null;
  const [draft, setDraft] = useState<ScheduleDraft>(() => scheduleDraft(schedule, Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"));
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<{ byField: Record<string, string>; rest: string[] }>({ byField: {}, rest: [] });
  const set = (key: keyof ScheduleDraft) => (e: { target: { value: string } }) => setDraft((d) => ({ ...d, [key]: e.target.value }));
  const submit = async () => {
    const made = scheduleBody(draft, schedule);
    if ("error" in made) {
      setErrors({ byField: made.error, rest: [] });
      return;
    }
    if (editing && Object.keys(made.body).length === 0) {
      onClose();
      return;
    }
    setBusy(true);
    try {
      await api(base, { method: editing ? "PATCH" : "POST", body: made.body });
      onSaved();
    } catch (err) {
      setErrors(err instanceof ApiError && Object.keys(err.fields).length > 0 ? scheduleFieldErrors(err.fields) : { byField: {}, rest: [failureText(err)] });
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
  // Versions 1..latest, newest first; a pinned version above the latest (none should be) still shows.
  const newest = Math.max(latestVersion ?? 0, schedule?.version ?? 0);
  const versions = Array.from({ length: newest }, (_, i) => newest - i);
  const title = editing ? `Edit schedule ${schedule.name}` : "New schedule";
  return (
    <Dialog title={title} onClose={onClose} wide>
      <form className="webhook-form" onSubmit={(e) => { e.preventDefault(); void submit(); }} noValidate>
        {field("name", "Name", <input id="schedule-name" value={draft.name} onChange={set("name")} placeholder="e.g. nightly" maxLength={100} {...invalid("name")} />,
          editing ? "Its runs record their source as “schedule <name>”." : undefined)}
        <div className="field-pair">
          {field("cron", "Cron expression", <input id="schedule-cron" className="mono" value={draft.cron} onChange={set("cron")} {...invalid("cron")} />,
            "Five fields: minute hour day-of-month month day-of-week, e.g. 30 2 * * * (02:30 daily).")}
          {field("timezone", "Time zone", <input id="schedule-timezone" value={draft.timezone} onChange={set("timezone")} {...invalid("timezone")} />,
            "An IANA name such as Europe/Paris or UTC.")}
        </div>
        {field("input", "Run input (JSON)", <textarea id="schedule-input" className="mono" rows={4} value={draft.input} onChange={set("input")} {...invalid("input")} />,
          "Checked against the input schema of the version it runs.")}
        {field("version", "Version", (
          <select id="schedule-version" value={draft.version} onChange={set("version")} {...invalid("version")}>
            <option value="">Latest published{latestVersion !== null ? ` (now v${latestVersion})` : ""}</option>
            {versions.map((v) => <option key={v} value={String(v)}>Version {v}</option>)}
          </select>
        ), "Latest follows each publish; a pinned version stays until you change it.")}
        <div className="field-pair">
          {field("overlap_policy", "While the last run is still active", (
            <select id="schedule-overlap_policy" value={draft.overlap_policy} onChange={set("overlap_policy")} {...invalid("overlap_policy")}>
              <option value="skip">Skip the tick</option>
              <option value="allow">Start another run</option>
              <option value="queue">Queue it behind the last run</option>
            </select>
          ))}
          {field("missed_policy", "Ticks missed in an outage", (
            <select id="schedule-missed_policy" value={draft.missed_policy} onChange={set("missed_policy")} {...invalid("missed_policy")}>
              <option value="skip">Skip them</option>
              <option value="catch_up">Run the latest once, within a window</option>
            </select>
          ))}
        </div>
        {draft.missed_policy === "catch_up" || errors.byField.catch_up_window_seconds
          ? field("catch_up_window_seconds", "Catch-up window (seconds)", (
            <input id="schedule-catch_up_window_seconds" inputMode="numeric" value={draft.catch_up_window_seconds} onChange={set("catch_up_window_seconds")} {...invalid("catch_up_window_seconds")} />
          ), /^\d+$/.test(draft.catch_up_window_seconds.trim()) && Number(draft.catch_up_window_seconds) > 0
            ? `A missed tick still runs if the schedule fires again within ${duration(Number(draft.catch_up_window_seconds))} of it (at most 7 days).`
            : "How late a missed tick may still run, up to 604800 (7 days).")
          : null}
        {errors.rest.length > 0 && <div role="alert" className="panel-error">{errors.rest.map((line, i) => <p key={i}>{line}</p>)}</div>}
        <div className="dialog__actions">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy}>
            {busy ? (editing ? "Saving…" : "Creating…") : editing ? "Save schedule" : "Create schedule"}
          </Button>
        </div>
      </form>
    </Dialog>
  );
}
