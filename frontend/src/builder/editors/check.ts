// The server's expression/template checker (POST /api/v1/expressions/check/) for the code editors.
import type { ExpressionCheck, SourceProblem } from "../../api/types";
import { api } from "../../lib/api";
import type { EditorLanguage } from "./fields";

/**
 * Ask the server whether ``source`` parses as ``kind`` and names only ``stateKeys``.
 * Throws ApiError on a non-2xx answer, TypeError on network failure, and DOMException
 * ("AbortError") when ``signal`` aborts.
 */
export function checkSource(kind: EditorLanguage, source: string, stateKeys: string[], signal?: AbortSignal): Promise<ExpressionCheck> {
  return api<ExpressionCheck>("expressions/check/", { method: "POST", body: { kind, source, state_keys: stateKeys }, signal });
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

/**
 * A problem as the editor lists it: ``line 1, column 15: <message>``, without the place when
 * the message already names it (the parser's "syntax error at line 1, column 15: …").
 */
export function problemText(p: SourceProblem): string {
  if (p.line === null) return p.message;
  const place = `line ${p.line}${p.column !== null ? `, column ${p.column}` : ""}`;
  return p.message.includes(place) ? p.message : `${place}: ${p.message}`;
}

// Graph validation says what kind of source failed ("invalid expression: …"); the checker does not.
const KIND_PREFIX = /^invalid (expression|template): /;
const PLACE_PREFIX = /^line \d+(, column \d+)?: /;

/**
 * The editor's own problems that the field does not show already: ``known`` are the graph
 * validation's messages listed under the field, which say the same thing with other
 * prefixes ("invalid expression: …" against "line 1, column 5: …"), so both are stripped
 * before comparing and each problem is shown once.
 */
export function unshownProblems(problems: readonly string[], known: readonly string[]): string[] {
  const bare = (m: string) => m.replace(PLACE_PREFIX, "").replace(KIND_PREFIX, "").trim();
  const seen = new Set(known.map(bare));
  return problems.filter((p) => !seen.has(bare(p)));
}
