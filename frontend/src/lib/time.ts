// How times read in the app: clock times to the millisecond in the browser's time zone, spans, offsets from a run's start and "ago".
import { useEffect, useState } from "react";

type When = string | number | Date | null | undefined;

/** Epoch ms of ``when`` (an ISO string, epoch ms or a Date); null when missing or unreadable. */
export function epochMs(when: When): number | null {
  if (when === null || when === undefined || when === "") return null;
  const ms = when instanceof Date ? when.getTime() : typeof when === "number" ? when : new Date(when).getTime();
  return Number.isFinite(ms) ? ms : null;
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** "20:31:05.123": the local time of day to the millisecond; "—" when missing. */
export function formatClock(when: When): string {
  const ms = epochMs(when);
  if (ms === null) return "—";
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/**
 * "2026-12-01 20:31:05.123" in the browser's time zone (``precision`` "minute": "2026-12-01
 * 20:31", for pages where seconds say nothing, such as when a graph was edited); "—" when
 * missing; an unreadable string as it is.
 */
export function formatDateTime(when: When, precision: "ms" | "minute" = "ms"): string {
  const ms = epochMs(when);
  if (ms === null) return typeof when === "string" && when ? when : "—";
  const d = new Date(ms);
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return precision === "minute" ? `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}` : `${day} ${formatClock(ms)}`;
}

/** A length of time in ms as "850 ms", "12.3 s", "4 min 05 s", "2 h 03 min" (``fine``: "1.250 s", "4 min 05.250 s"); "—" when negative or not a number. */
export function formatSpan(ms: number, fine = false): string {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${fine ? s.toFixed(3) : s.toFixed(1)} s`;
  const min = Math.floor(s / 60);
  const rest = fine ? (s % 60).toFixed(3).padStart(6, "0") : pad(Math.floor(s % 60));
  if (min < 60) return `${min} min ${rest} s`;
  return `${Math.floor(min / 60)} h ${pad(min % 60)} min`;
}

/** The span between two times ("—" when either is missing or the end is before the start). */
export function formatBetween(start: When, end: When): string {
  const a = epochMs(start);
  const b = epochMs(end);
  return a === null || b === null ? "—" : formatSpan(b - a);
}

/** "+1.250 s" (ms after an origin such as the run's start; "+0.085 s", "+2 min 05.250 s"); "−0.010 s" before it. */
export function formatOffset(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  const sign = ms < 0 ? "−" : "+";
  const abs = Math.abs(ms);
  return abs < 60_000 ? `${sign}${(abs / 1000).toFixed(3)} s` : `${sign}${formatSpan(abs, true)}`;
}

/** "+1.250 s from run start" for ``when`` against ``origin``; "" when either is missing. */
export function formatFromStart(when: When, origin: When, what = "run start"): string {
  const a = epochMs(when);
  const o = epochMs(origin);
  return a === null || o === null ? "" : `${formatOffset(a - o)} from ${what}`;
}

/** "just now", "3 s ago", "4 min ago", "2 h ago", "5 d ago" (the future: "in 3 s"); "" when missing. */
export function formatAgo(when: When, now: number): string {
  const ms = epochMs(when);
  if (ms === null) return "";
  const diff = now - ms;
  const abs = Math.abs(diff);
  if (abs < 1000) return "just now";
  const s = Math.floor(abs / 1000);
  const words = s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min` : s < 86_400 ? `${Math.floor(s / 3600)} h` : `${Math.floor(s / 86_400)} d`;
  return diff > 0 ? `${words} ago` : `in ${words}`;
}

/** Now in epoch ms, read again every ``everyMs`` (none while ``everyMs`` is null): relative times and growing bars tick with it. */
export function useNow(everyMs: number | null): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (everyMs === null) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}
