// The schedule API's shapes and the pure helpers of the Triggers panel's schedules (no React, no DOM).
import type { Schedule, ScheduleTick } from "../../api/types";

/** A schedule as GET /api/v1/graphs/<id>/schedules/ lists it (the API's ScheduleOutput); one tick of its log (TickOutput). */
export type { Schedule, ScheduleTick };

/** The fields of the schedule form, as typed. ``version``: "" for the latest published version. */
export interface ScheduleDraft {
  name: string;
  cron: string;
  timezone: string;
  input: string;
  version: string;
  overlap_policy: string;
  missed_policy: string;
  catch_up_window_seconds: string;
}

/** The form's starting values: a new schedule's defaults, or ``schedule`` as it is. */
export function scheduleDraft(schedule: Schedule | null, timezone = "UTC"): ScheduleDraft {
  if (schedule === null) {
    return { name: "", cron: "0 9 * * MON-FRI", timezone, input: "{}", version: "", overlap_policy: "skip", missed_policy: "skip", catch_up_window_seconds: "3600" };
  }
  return {
    name: schedule.name, cron: schedule.cron, timezone: schedule.timezone, input: JSON.stringify(schedule.input, null, 2),
    version: schedule.version === null ? "" : String(schedule.version), overlap_policy: schedule.overlap_policy,
    missed_policy: schedule.missed_policy, catch_up_window_seconds: String(schedule.catch_up_window_seconds),
  };
}

/**
 * The request body of the form: every field for a new schedule (``schedule`` null), only the
 * changed ones for an edit (a PATCH re-times a schedule whose cron or time zone it names).
 * ``{error: {field: message}}`` when a field cannot be sent as typed (the input's JSON, the window).
 */
export function scheduleBody(draft: ScheduleDraft, schedule: Schedule | null): { body: Record<string, unknown> } | { error: Record<string, string> } {
  const parsed = parseInput(draft.input);
  const errors: Record<string, string> = {};
  if ("error" in parsed) errors.input = parsed.error;
  const window = draft.catch_up_window_seconds.trim();
  if (!/^\d+$/.test(window)) errors.catch_up_window_seconds = "A whole number of seconds.";
  if (Object.keys(errors).length) return { error: errors };
  const full: Record<string, unknown> = {
    name: draft.name.trim(), cron: draft.cron.trim(), timezone: draft.timezone.trim(), input: "value" in parsed ? parsed.value : {},
    version: draft.version === "" ? null : Number(draft.version), overlap_policy: draft.overlap_policy, missed_policy: draft.missed_policy,
    catch_up_window_seconds: Number(window),
  };
  if (schedule === null) return { body: full };
  const before: Record<string, unknown> = {
    name: schedule.name, cron: schedule.cron, timezone: schedule.timezone, input: schedule.input, version: schedule.version,
    overlap_policy: schedule.overlap_policy, missed_policy: schedule.missed_policy, catch_up_window_seconds: schedule.catch_up_window_seconds,
  };
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(full)) {
    if (JSON.stringify(value) !== JSON.stringify(before[key])) body[key] = value;
  }
  return { body };
}

/** A duration in seconds for people: "1 h", "90 min", "45 s", "2 d". */
export function duration(seconds: number): string {
  if (seconds % 86400 === 0) return `${seconds / 86400} d`;
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

/** What a tick did, for people (the API's TickOutcome). */
export const TICK_OUTCOMES: Readonly<Record<string, string>> = {
  started: "Started a run",
  skipped_overlap: "Skipped: previous run still active",
  skipped_missed: "Skipped: missed",
  failed: "Failed to start",
};

/** A tick's error (``{code, message, fields}`` as the API's errors, or anything) as one line. */
export function tickError(error: unknown): string {
  if (error === null || error === undefined) return "";
  if (typeof error === "object" && !Array.isArray(error)) {
    const e = error as { message?: unknown; fields?: unknown };
    const fields = e.fields && typeof e.fields === "object" ? Object.entries(e.fields as Record<string, unknown>).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(" ") : String(v)}`) : [];
    if (typeof e.message === "string") return [e.message, ...fields].join(" · ");
  }
  return typeof error === "string" ? error : JSON.stringify(error);
}

/** A fire time for people: the viewer's local date and time, with its zone's short name. */
export function fireTime(iso: string, locale?: string, timeZone?: string): string {
  return new Date(iso).toLocaleString(locale, { timeZone, weekday: "short", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" });
}

/** A tick's time, short for the tick log's narrow column: the viewer's local date and time (the zone is in its title). */
export function tickTime(iso: string, locale?: string, timeZone?: string): string {
  return new Date(iso).toLocaleString(locale, { timeZone, month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** The run input typed in the form, parsed: the object, or why it is not one. */
export function parseInput(text: string): { value: Record<string, unknown> } | { error: string } {
  if (!text.trim()) return { value: {} };
  try {
    const value: unknown = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) return { error: "The input must be a JSON object, e.g. {\"x\": 1}." };
    return { value: value as Record<string, unknown> };
  } catch {
    return { error: "Not valid JSON." };
  }
}

/** The form fields the server's errors are shown at. */
const FORM_FIELDS = new Set(["name", "cron", "timezone", "version", "overlap_policy", "missed_policy", "catch_up_window_seconds"]);

/** The server's field errors for the schedule form: at their fields (``input.x`` and the like
 * go under the input), the rest as lines. */
export function scheduleFieldErrors(fields: Record<string, string[]>): { byField: Record<string, string>; rest: string[] } {
  const byField: Record<string, string> = {};
  const rest: string[] = [];
  for (const [path, messages] of Object.entries(fields)) {
    const text = messages.join(" ");
    if (FORM_FIELDS.has(path)) byField[path] = text;
    else if (path === "input" || path.startsWith("input.") || path.startsWith("input[")) byField.input = [byField.input, path === "input" ? text : `${path.slice(6)}: ${text}`].filter(Boolean).join(" ");
    else rest.push(`${path}: ${text}`);
  }
  return { byField, rest };
}
