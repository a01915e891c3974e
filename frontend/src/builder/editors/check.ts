// The server's expression/template checker (POST /api/v1/expressions/check/) for the code editors.
import { api } from "../../lib/api";
import type { EditorLanguage } from "./fields";

/** One problem the server found; ``line``/``column`` are 1-based, null when unknown. */
export interface SourceProblem {
  message: string;
  line: number | null;
  column: number | null;
}

export interface CheckResult {
  ok: boolean;
  errors: SourceProblem[];
}

/**
 * Ask the server whether ``source`` parses as ``kind`` and names only ``stateKeys``.
 * Throws ApiError on a non-2xx answer, TypeError on network failure, and DOMException
 * ("AbortError") when ``signal`` aborts.
 */
export function checkSource(kind: EditorLanguage, source: string, stateKeys: string[], signal?: AbortSignal): Promise<CheckResult> {
  return api<CheckResult>("expressions/check/", { method: "POST", body: { kind, source, state_keys: stateKeys }, signal });
}

/** The document offset of a 1-based (line, column) in ``text``, clamped into the text. */
export function offsetOf(text: string, line: number | null, column: number | null): number {
  if (line === null || line < 1) return 0;
  const lines = text.split("\n");
  let offset = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length - 1); i++) offset += (lines[i]?.length ?? 0) + 1;
  const lineText = lines[Math.min(line, lines.length) - 1] ?? "";
  return offset + Math.min(Math.max((column ?? 1) - 1, 0), lineText.length);
}
