// A CodeMirror 6 JSON editor for a fork's state: problems (from forkPatch and from the server) drawn in
// the text at their path and listed under it by path, so they are read out and visible without hover.
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { json } from "@codemirror/lang-json";
import { defaultHighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { forceLinting, linter, type Diagnostic } from "@codemirror/lint";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap } from "@codemirror/view";
import { useEffect, useRef } from "react";
import { editorTheme } from "../builder/editors/theme";
import type { StateProblem } from "./actions";

const theme = editorTheme("8em", "22em");

export interface StateEditorProps {
  id: string;
  /** The text the editor starts with (a new value replaces the document: another step chosen). */
  initial: string;
  onChange(text: string): void;
  /** Problems to draw; a new array redraws them. */
  problems: readonly StateProblem[];
  ariaLabel: string;
  ariaDescribedBy?: string;
}

export function StateEditor({ id, initial, onChange, problems, ariaLabel, ariaDescribedBy }: StateEditorProps) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const latest = useRef({ onChange, problems, ariaLabel, ariaDescribedBy });
  latest.current = { onChange, problems, ariaLabel, ariaDescribedBy };

  useEffect(() => {
    if (!host.current) return;
    const lint = linter(
      (v): Diagnostic[] => {
        const length = v.state.doc.length;
        return latest.current.problems.map((p) => {
          const from = Math.min(p.from, length);
          return { from, to: Math.min(Math.max(from, p.to), length), severity: p.severity, message: p.path ? `${p.path}: ${p.message}` : p.message, source: "ballast" };
        });
      },
      { delay: 0 },
    );
    const created = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: initial,
        extensions: [
          history(),
          keymap.of([...defaultKeymap, ...historyKeymap]),
          json(),
          syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
          lint,
          theme,
          EditorView.lineWrapping,
          EditorView.contentAttributes.of({
            id,
            "aria-label": latest.current.ariaLabel,
            "aria-multiline": "true",
            ...(latest.current.ariaDescribedBy ? { "aria-describedby": latest.current.ariaDescribedBy } : {}),
          }),
          EditorView.updateListener.of((u) => {
            if (u.docChanged) latest.current.onChange(u.state.doc.toString());
          }),
        ],
      }),
    });
    view.current = created;
    return () => {
      created.destroy();
      view.current = null;
    };
    // Rebuilt for a new starting text (another step) only; the rest is read through `latest`.
  }, [initial, id]);

  // New problems (typed text checked, the server answered): draw them now.
  useEffect(() => {
    if (view.current) forceLinting(view.current);
  }, [problems]);

  return <div ref={host} className="state-editor" />;
}
