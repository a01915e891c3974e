// A free-form JSON value edited as text in a CodeEditor (tool arguments, defaults, test state).
import { useState } from "react";
import { CodeEditor } from "./CodeEditor";

/** JSON text of a value for editing (two-space indent; empty for undefined). */
export function jsonText(value: unknown): string {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

interface JsonValueEditorProps {
  id: string;
  value: unknown;
  onChange(value: unknown): void;
  readOnly?: boolean;
  label?: string;
}

/** Edit any JSON value as text; only text that parses is passed on (the editor marks the rest). */
export function JsonValueEditor({ id, value, onChange, readOnly, label }: JsonValueEditorProps) {
  const [text, setText] = useState(() => jsonText(value));
  const [shown, setShown] = useState(value);
  // An outside change (undo) replaces the text; our own valid edits already match it.
  if (!Object.is(shown, value)) {
    setShown(value);
    let same: boolean;
    try {
      same = JSON.stringify(JSON.parse(text)) === JSON.stringify(value);
    } catch {
      same = false;
    }
    if (!same) setText(jsonText(value));
  }
  return (
    <CodeEditor
      id={id}
      value={text}
      language="json"
      readOnly={readOnly}
      ariaLabel={label}
      onChange={(next) => {
        setText(next);
        if (next.trim() === "") {
          setShown(undefined);
          onChange(undefined);
          return;
        }
        try {
          const parsed: unknown = JSON.parse(next);
          setShown(parsed);
          onChange(parsed);
        } catch {
          // Keep the text; the editor's JSON lint says what is wrong.
        }
      }}
    />
  );
}
