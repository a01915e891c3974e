// The app's CodeMirror look, shared by every code editor (its own module so a page that only
// needs the look does not pull in the languages and the server check).
import type { Extension } from "@codemirror/state";
import { EditorView } from "@codemirror/view";

/**
 * The app's CodeMirror look (border, focus ring, monospace) for an editor whose text area grows
 * from ``minHeight`` and scrolls beyond ``maxHeight`` (CSS lengths, e.g. "1.6em").
 */
export function editorTheme(minHeight: string, maxHeight: string): Extension {
  return EditorView.theme({
    "&": { fontSize: "13px", border: "1px solid var(--border, #dfe3e8)", borderRadius: "var(--radius, 6px)", background: "#fff" },
    "&.cm-focused": { outline: "2px solid var(--accent, #2f6fed)", outlineOffset: "-1px" },
    ".cm-content": { fontFamily: "var(--mono, monospace)", minHeight, padding: "4px 0" },
    ".cm-scroller": { maxHeight, overflow: "auto" },
  });
}
