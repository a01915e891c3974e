// Validation on the canvas: POST the spec to /api/v1/graphs/validate/ after every change (debounced).
import type { ValidationResult } from "../api/types";
import { useEffect, useRef, useState } from "react";
import { ApiError, api } from "../lib/api";
import type { GraphSpec } from "./spec";

export const VALIDATE_DEBOUNCE_MS = 350;

/**
 * The server's validation of ``spec``: null until the first answer; the previous answer
 * stays while a newer request is in flight (stale answers are discarded). A 400 with a
 * structured body (the spec does not even parse) becomes an invalid result whose errors
 * are the body's field messages.
 */
export function useValidation(spec: GraphSpec, enabled = true): { result: ValidationResult | null; pending: boolean; failed: string | null } {
  const [result, setResult] = useState<ValidationResult | null>(null);
  const [pending, setPending] = useState(false);
  const [failed, setFailed] = useState<string | null>(null);
  const seq = useRef(0);
  useEffect(() => {
    if (!enabled) return;
    const mine = ++seq.current;
    const ctrl = new AbortController();
    setPending(true);
    const timer = window.setTimeout(() => {
      api<ValidationResult>("graphs/validate/", { method: "POST", body: spec, signal: ctrl.signal })
        .then((r) => { if (mine === seq.current) { setResult(r); setFailed(null); } })
        .catch((err: unknown) => {
          if (mine !== seq.current || (err instanceof DOMException && err.name === "AbortError")) return;
          if (err instanceof ApiError && err.status === 400) {
            const errors = Object.entries(err.fields).flatMap(([path, msgs]) => msgs.map((m) => ({ code: err.code, node: null, node_id: null, field: "", path, message: `${path}: ${m}` })));
            setResult({
              valid: false, errors: errors.length ? errors : [{ code: err.code, node: null, node_id: null, field: "", path: "", message: err.message }],
              warnings: [], handles: {}, estimate: null, content_hash: null,
            });
            setFailed(null);
          } else {
            setFailed(err instanceof Error ? err.message : String(err));
          }
        })
        .finally(() => { if (mine === seq.current) setPending(false); });
    }, VALIDATE_DEBOUNCE_MS);
    return () => { window.clearTimeout(timer); ctrl.abort(); };
  }, [spec, enabled]);
  return { result, pending, failed };
}
