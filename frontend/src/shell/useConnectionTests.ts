// The "Test connection" state of an admin list (LLM providers, MCP servers): per row name, testing, the API's result, or the error.
import { useState } from "react";
import { api } from "../lib/api";

/** One row's test: running, the API's answer, or why the call failed. */
export type ConnectionTest<R> = R | "testing" | Error;

/**
 * ``POST <collection>/<name>/test/`` per row, its outcome kept by name. Returns ``tests``
 * (name -> outcome), ``test(name)`` (starts one; ``onResult`` runs after a successful call,
 * e.g. to re-read the list) and ``forget(name)`` (drops a stale outcome after an edit).
 */
export function useConnectionTests<R>(collection: "providers" | "mcp-servers", onResult?: (name: string, result: R) => void) {
  const [tests, setTests] = useState<Record<string, ConnectionTest<R>>>({});
  const test = (name: string) => {
    setTests((t) => ({ ...t, [name]: "testing" }));
    api<R>(`${collection}/${encodeURIComponent(name)}/test/`, { method: "POST", body: {} }).then(
      (r) => { setTests((t) => ({ ...t, [name]: r })); onResult?.(name, r); },
      (err: unknown) => setTests((t) => ({ ...t, [name]: err instanceof Error ? err : new Error(String(err)) })),
    );
  };
  const forget = (name: string) => setTests((t) => { const { [name]: _gone, ...rest } = t; return rest; });
  return { tests, test, forget };
}
