// The schedule API's shapes and the pure helpers of the Triggers panel's schedules (no React, no DOM).
import type { Schedule } from "../../api/types";

/** A schedule as GET /api/v1/graphs/<id>/schedules/ lists it (the API's ScheduleOutput). */
export type { Schedule };

/** A fire time for people: the viewer's local date and time, with its zone's short name. */
export function fireTime(iso: string, locale?: string, timeZone?: string): string {
  return new Date(iso).toLocaleString(locale, { timeZone, weekday: "short", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" });
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

/** The server's field errors for the schedule form: ``cron``, ``timezone``, ``name`` and ``input``
 * (``input.x`` and the like go under the input), the rest as lines. */
export function scheduleFieldErrors(fields: Record<string, string[]>): { byField: Record<string, string>; rest: string[] } {
  const byField: Record<string, string> = {};
  const rest: string[] = [];
  for (const [path, messages] of Object.entries(fields)) {
    const text = messages.join(" ");
    if (path === "name" || path === "cron" || path === "timezone") byField[path] = text;
    else if (path === "input" || path.startsWith("input.") || path.startsWith("input[")) byField.input = [byField.input, path === "input" ? text : `${path.slice(6)}: ${text}`].filter(Boolean).join(" ");
    else rest.push(`${path}: ${text}`);
  }
  return { byField, rest };
}
