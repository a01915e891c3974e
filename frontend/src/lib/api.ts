// One fetch wrapper for the REST API: JSON in and out, CSRF, structured errors as ApiError.
import type { ApiErrorBody } from "../api/types";

/** A non-2xx answer. ``fields`` maps a field path (``nodes[0].config.x``) to its messages. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly fields: Record<string, string[]>;
  readonly body: ApiErrorBody | null;

  constructor(status: number, body: ApiErrorBody | null, fallback: string) {
    super(body?.error.message ?? fallback);
    this.name = "ApiError";
    this.status = status;
    this.code = body?.error.code ?? "http_" + String(status);
    this.body = body;
    const fields: Record<string, string[]> = {};
    for (const [k, v] of Object.entries(body?.error.fields ?? {})) fields[k] = Array.isArray(v) ? v : [String(v)];
    this.fields = fields;
  }
}

let csrfToken = "";

/** Set the CSRF token sent with unsafe methods (from the page context). */
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

export const API_ROOT = "/api/v1/";

export interface RequestOptions {
  method?: "GET" | "POST" | "PATCH" | "PUT" | "DELETE";
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * Call ``API_ROOT + path`` and return the parsed JSON (``undefined`` for 204).
 * Throws ApiError for any non-2xx answer (with the structured body when there is one),
 * and TypeError when the network fails.
 */
export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
  let body: BodyInit | undefined;
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.body);
  }
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken;
  const url = path.startsWith("/") ? path : API_ROOT + path;
  const response = await fetch(url, { method, headers, body, credentials: "same-origin", signal: options.signal });
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    const errBody = parsed && typeof parsed === "object" && "error" in parsed ? (parsed as ApiErrorBody) : null;
    throw new ApiError(response.status, errBody, `${method} ${url}: HTTP ${response.status}`);
  }
  return parsed as T;
}
