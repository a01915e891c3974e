// The home dashboard's arithmetic: UTC day ranges for "today" and "this week", and links into the run list and cost report.

/** YYYY-MM-DD of ``d`` in UTC. */
export function utcDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

/** Today and this ISO week (Monday first) as UTC day ranges, both ends inclusive (the cost report's since/until). */
export function spendRanges(now: Date = new Date()): { today: { since: string; until: string }; week: { since: string; until: string } } {
  const today = utcDay(now);
  const monday = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  monday.setUTCDate(monday.getUTCDate() - ((monday.getUTCDay() + 6) % 7));
  return { today: { since: today, until: today }, week: { since: utcDay(monday), until: today } };
}

/** The run list filtered to ``status`` from the UTC day the window starts (the list filters by whole days). */
export function runsLink(status: string, since: string | null): string {
  const params = new URLSearchParams({ status });
  if (since) params.set("from", since.slice(0, 10));
  return `/runs/?${params.toString()}`;
}

/** The cost report over a day range. */
export function costsLink(range: { since: string; until: string }): string {
  return `/costs/?${new URLSearchParams(range).toString()}`;
}

/** A run's error as one short line: its message (or code), at most ``max`` characters. */
export function errorLine(error: unknown, max = 140): string {
  let text = "";
  if (error && typeof error === "object") {
    const e = error as { message?: unknown; code?: unknown };
    text = typeof e.message === "string" && e.message ? e.message : typeof e.code === "string" ? e.code : "";
  } else if (typeof error === "string") {
    text = error;
  }
  text = text.replace(/\s+/g, " ").trim() || "No error message was recorded.";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * When a spend figure counts from, in words that agree with its card: the week's card says
 * "this week (since Monday ...)" even on a Monday, when its range is one day (today's figure
 * and the week's are then the same number, not the week's card showing today's).
 */
export function spendPeriod(week: boolean, range: { since: string; until: string }): string {
  if (!week) return ` today (${range.until}, UTC day)`;
  return range.since === range.until ? ` this week: Monday ${range.since} (UTC) is today` : ` this week, since Monday ${range.since} (UTC)`;
}
