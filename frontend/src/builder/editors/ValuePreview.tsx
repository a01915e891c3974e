// One line under an expression or template field: what it resolves to against the node's test data, evaluated by the server's sandbox.
import type { ValuePreview as PreviewAnswer } from "../../api/types";
import { useEffect, useState } from "react";
import { api, ApiError } from "../../lib/api";

/** Delay (ms) between the last keystroke and the preview request. */
export const PREVIEW_DELAY_MS = 350;

interface Props {
  graphId: number;
  language: "expression" | "template";
  source: string;
  /** The state to resolve against (pinned data or last input); undefined: none yet. */
  state: Record<string, unknown> | undefined;
  stateLabel: string;
  /** DOM id of the line (the field's aria-describedby may point at it). */
  id: string;
}

type Shown = { kind: "idle" } | { kind: "value"; answer: PreviewAnswer } | { kind: "failed"; message: string };

/** Where an error is, as "line 1, column 5" (nothing when the server gives no place). */
export function placeText(line: number | null | undefined, column: number | null | undefined): string {
  if (line === null || line === undefined) return "";
  return column === null || column === undefined ? ` (line ${line})` : ` (line ${line}, column ${column})`;
}

/**
 * The resolved value (``= 42``, a template's text) or the error with where it is, refreshed
 * ``PREVIEW_DELAY_MS`` after the source or the state last changed; an answer for an older
 * source is dropped. Without test data it says how to get some.
 */
export function ValuePreview({ graphId, language, source, state, stateLabel, id }: Props) {
  const [shown, setShown] = useState<Shown>({ kind: "idle" });
  const empty = source.trim() === "";
  useEffect(() => {
    if (empty || state === undefined) return;
    const controller = new AbortController();
    const timer = window.setTimeout(() => {
      api<PreviewAnswer>(`graphs/${graphId}/draft/preview/`, { method: "POST", body: { kind: language, source, state }, signal: controller.signal })
        .then((answer) => setShown({ kind: "value", answer }))
        .catch((err: unknown) => {
          if (controller.signal.aborted) return;
          setShown({ kind: "failed", message: err instanceof ApiError ? err.message : "The preview is unavailable." });
        });
    }, PREVIEW_DELAY_MS);
    return () => {
      window.clearTimeout(timer);
      controller.abort();
    };
  }, [graphId, language, source, state, empty]);

  if (empty) return null;
  if (state === undefined) {
    return (
      <p className="value-preview value-preview--none" id={id}>
        <span className="value-preview__tag">Preview</span> Test the node or pin test data to see what this resolves to.
      </p>
    );
  }
  if (shown.kind === "idle") return <p className="value-preview value-preview--pending" id={id} aria-busy="true"><span className="value-preview__tag">Preview</span> …</p>;
  if (shown.kind === "failed") return <p className="value-preview value-preview--error" id={id}><span className="value-preview__tag">Preview</span> {shown.message}</p>;
  const a = shown.answer;
  if (!a.ok) {
    const e = a.error;
    return (
      <p className="value-preview value-preview--error" id={id} aria-live="polite" title={`Against the ${stateLabel}`}>
        <span className="value-preview__tag">Error</span>{" "}
        <span className="value-preview__text">{e?.message}{placeText(e?.line, e?.column)}</span>
      </p>
    );
  }
  return (
    <p className="value-preview value-preview--ok" id={id} aria-live="polite" title={`Against the ${stateLabel}`}>
      <span className="value-preview__tag">{language === "template" ? "Renders" : "="}</span>
      <code className="value-preview__text" data-testid="value-preview" title={a.display}>{a.display}</code>
      {a.type && language === "expression" && <span className="value-preview__type">{a.type}</span>}
      <span className="value-preview__from">{stateLabel}</span>
    </p>
  );
}
