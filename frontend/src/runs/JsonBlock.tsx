// A step's JSON values and engine errors as the run page and its step inspector show them.

/** Pretty JSON in a scrollable block; "—" for null/undefined. */
export function JsonBlock({ value, label }: { value: unknown; label: string }) {
  if (value === null || value === undefined) return <p className="muted">—</p>;
  return <pre className="json" aria-label={label} tabIndex={0}>{JSON.stringify(value, null, 2)}</pre>;
}

/** An error value from the engine (``{"type", "message", ...}`` or a string) as one line. */
export function errorText(error: unknown): string {
  if (error === null || error === undefined) return "";
  if (typeof error === "string") return error;
  if (typeof error === "object") {
    const e = error as { type?: string; message?: string };
    if (e.message) return e.type ? `${e.type}: ${e.message}` : e.message;
  }
  return JSON.stringify(error);
}
