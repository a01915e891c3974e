// A CodeMirror 6 editor for expressions (Python-like), templates (Jinja) and JSON, checked as you type.
import type { SourceProblem } from "../../api/types";
import { autocompletion, type Completion, type CompletionContext, type CompletionResult } from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { jinja, jinjaCompletionSource } from "@codemirror/lang-jinja";
import { json } from "@codemirror/lang-json";
import { python } from "@codemirror/lang-python";
import { defaultHighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { linter, type Diagnostic } from "@codemirror/lint";
import { Annotation, Compartment, EditorState, Prec, type Extension } from "@codemirror/state";
import { EditorView, keymap, placeholder as placeholderExt } from "@codemirror/view";
import { useContext, useEffect, useRef, useState } from "react";
import { CodeAssistContext } from "./assist";
import { ValuePreview } from "./ValuePreview";
import { VariablePicker, type PickerKeys } from "./VariablePicker";
import { ApiError } from "../../lib/api";
import { checkSource, offsetOf, problemText, unshownProblems } from "./check";
import { editorTheme } from "./theme";
import type { EditorLanguage } from "./fields";

export type CodeLanguage = EditorLanguage | "json";

/** Delay (ms) between the last keystroke and the server check. */
export const CHECK_DELAY_MS = 400;

const PY_WORDS = ["and", "or", "not", "in", "is", "if", "else", "None", "True", "False"];

/** Completions for an expression: the graph's names, then Python-like keywords. */
export function expressionCompletions(names: readonly string[]) {
  return (context: CompletionContext): CompletionResult | null => {
    const word = context.matchBefore(/[A-Za-z_][A-Za-z0-9_]*/);
    if (!word && !context.explicit) return null;
    // After a dot the user is naming an attribute or key, not a state key.
    const from = word?.from ?? context.pos;
    if (from > 0 && context.state.sliceDoc(from - 1, from) === ".") return null;
    const options: Completion[] = [
      ...names.map((name) => ({ label: name, type: "variable", detail: "state", boost: 1 })),
      ...PY_WORDS.map((kw) => ({ label: kw, type: "keyword" })),
    ];
    return { from, options, validFor: /^[A-Za-z0-9_]*$/ };
  };
}

/** Completions for a template: Jinja's own (tags, filters) plus the graph's names as variables. */
export function templateCompletions(names: readonly string[]) {
  const variables = names.map((name) => ({ label: name, type: "variable", detail: "state" }));
  return jinjaCompletionSource({ variables });
}

const External = Annotation.define<boolean>();

/** An open variable picker: the range its pick replaces; ``typed`` when "{{" opened it (the words after the braces). */
interface OpenPicker {
  from: number;
  to: number;
  typed?: string;
}

const theme = editorTheme("1.6em", "16em");

export interface CodeEditorProps {
  /** id of the focusable editor content (labels point at it with htmlFor). */
  id: string;
  value: string;
  onChange(value: string): void;
  onBlur?(): void;
  language: CodeLanguage;
  /** Names offered as completions and sent to the server check as known state keys. */
  names?: readonly string[];
  /** Ask the server to check as you type (expressions and templates; default true). */
  check?: boolean;
  readOnly?: boolean;
  placeholder?: string;
  ariaLabel?: string;
  ariaDescribedBy?: string;
  /** Messages already shown for this field (the graph validation's): not listed twice under it. */
  knownErrors?: readonly string[];
}

function languageExtension(language: CodeLanguage): Extension {
  if (language === "expression") return python();
  if (language === "template") return jinja();
  return json();
}


/**
 * A controlled code editor. Expressions and templates are checked by the server
 * ``CHECK_DELAY_MS`` after typing stops; JSON is checked locally. Problems are drawn in the
 * text (@codemirror/lint) and listed under it, so they are read out and visible without hover.
 */
/** The editor's read-only and editable facets for ``readOnly`` (kept in one compartment). */
function editableExtensions(readOnly: boolean): Extension {
  return [EditorState.readOnly.of(readOnly), EditorView.editable.of(!readOnly)];
}

export function CodeEditor(props: CodeEditorProps) {
  const { id, value, language, readOnly = false } = props;
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const latest = useRef(props);
  latest.current = props;
  const editable = useRef(new Compartment());
  // Texts handed to onChange that the value prop has not caught up with yet.
  const emitted = useRef<string[]>([]);
  const [problems, setProblems] = useState<string[]>([]);
  const [checkFailed, setCheckFailed] = useState<string | null>(null);
  // The node panel's test data and variables (none in other editors: no picker, no preview).
  const assist = useContext(CodeAssistContext);
  const assisted = assist !== null && language !== "json" && !readOnly;
  const assistRef = useRef(assisted);
  assistRef.current = assisted;
  // The variable picker, open over the text it will replace: the selection (opened by the
  // button), or a typed "{{" and what follows it up to the caret (``typed``: the filter words).
  const [picker, setPickerState] = useState<OpenPicker | null>(null);
  const pickerRef = useRef<OpenPicker | null>(null);
  const setPicker = (next: OpenPicker | null) => { pickerRef.current = next; setPickerState(next); };
  const pickerKeys = useRef<PickerKeys | null>(null);

  useEffect(() => {
    if (!host.current) return;
    const names = () => latest.current.names ?? [];
    const completion =
      language === "json"
        ? []
        : autocompletion({
            override: [
              // While a typed "{{" has the picker open, it is the one list of names on screen.
              language === "expression"
                ? (ctx: CompletionContext) => expressionCompletions(names())(ctx)
                : (ctx: CompletionContext) => (pickerRef.current?.typed !== undefined ? null : templateCompletions(names())(ctx)),
            ],
          });
    // A picker opened by typing keeps the keyboard in the editor and takes only these keys.
    const toPicker = (key: Parameters<PickerKeys>[0]) => () =>
      pickerRef.current?.typed !== undefined && (pickerKeys.current?.(key) ?? false);
    const pickerKeymap = Prec.highest(keymap.of(
      (["ArrowDown", "ArrowUp", "Enter", "Tab", "Escape"] as const).map((key) => ({ key, run: toPicker(key) })),
    ));
    let sequence = 0;
    const lint = linter(
      async (v): Promise<Diagnostic[]> => {
        const text = v.state.doc.toString();
        const mine = ++sequence;
        let found: SourceProblem[] = [];
        if (language === "json") {
          if (text.trim()) {
            try {
              JSON.parse(text);
            } catch (err) {
              found = [{ code: "invalid_json", message: err instanceof Error ? err.message : "invalid JSON", line: null, column: null }];
            }
          }
        } else if (latest.current.check !== false && text.trim()) {
          try {
            const result = await checkSource(language, text, [...names()]);
            found = result.ok ? [] : result.errors;
            setCheckFailed(null);
          } catch (err) {
            // The check is a convenience: say it could not run, keep the editor usable.
            setCheckFailed(err instanceof ApiError ? err.message : "The expression check is unavailable.");
            return [];
          }
        }
        if (mine !== sequence) return [];
        setProblems(found.map(problemText));
        return found.map((p) => {
          const from = offsetOf(text, p.line, p.column);
          const to = p.line === null ? text.length : Math.min(text.length, Math.max(from + 1, v.state.doc.lineAt(from).to));
          return { from, to: Math.max(from, to), severity: "error", message: p.message, source: "ballast" };
        });
      },
      { delay: CHECK_DELAY_MS },
    );
    const state = EditorState.create({
      doc: latest.current.value,
      extensions: [
        history(),
        pickerKeymap,
        keymap.of([...defaultKeymap, ...historyKeymap]),
        languageExtension(language),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        completion,
        lint,
        theme,
        EditorView.lineWrapping,
        editable.current.of(editableExtensions(latest.current.readOnly ?? false)),
        latest.current.placeholder ? placeholderExt(latest.current.placeholder) : [],
        EditorView.contentAttributes.of({
          id,
          "aria-label": latest.current.ariaLabel ?? "",
          ...(latest.current.ariaDescribedBy ? { "aria-describedby": latest.current.ariaDescribedBy } : {}),
          "aria-multiline": "true",
        }),
        EditorView.updateListener.of((update) => {
          const head = update.state.selection.main.head;
          let opened = false;
          if (update.docChanged && !update.transactions.some((t) => t.annotation(External))) {
            const text = update.state.doc.toString();
            emitted.current.push(text);
            latest.current.onChange(text);
            // Typing "{{" in a template opens the picker, as Dify's "{" and n8n's "{{" do.
            if (language === "template" && assistRef.current && update.transactions.some((t) => t.isUserEvent("input.type"))
                && update.state.sliceDoc(head - 2, head) === "{{" && update.state.sliceDoc(head - 3, head - 2) !== "{") {
              setPicker({ from: head - 2, to: head, typed: "" });
              opened = true;
            }
          }
          // A typed picker follows the words after its "{{" and closes when the caret leaves
          // them or the user closes the braces (or starts a {% tag): the text stays as typed.
          const open = pickerRef.current;
          if (!opened && open?.typed !== undefined && (update.docChanged || update.selectionSet)) {
            const from = update.docChanged ? update.changes.mapPos(open.from) : open.from;
            const words = head >= from + 2 ? update.state.sliceDoc(from + 2, head) : null;
            if (update.state.sliceDoc(from, from + 2) !== "{{" || words === null || /[}\n%{]/.test(words)) setPicker(null);
            else if (words !== open.typed || from !== open.from) setPicker({ from, to: head, typed: words });
          }
          if (update.focusChanged && !update.view.hasFocus) {
            if (pickerRef.current?.typed !== undefined) setPicker(null);
            latest.current.onBlur?.();
          }
        }),
      ],
    });
    const created = new EditorView({ state, parent: host.current });
    view.current = created;
    return () => {
      sequence++;
      created.destroy();
      view.current = null;
    };
    // The view is rebuilt only for a new language or id; other props are read through
    // `latest` (readOnly at build time; a later change reconfigures the compartment below).
  }, [language, id]);

  // A value changed from outside (undo, another field) replaces the document without echoing
  // onChange. A value we emitted ourselves that arrives late (the panel may render a deferred
  // copy of the builder state) is not an outside change: applying it would drop later keystrokes.
  useEffect(() => {
    const v = view.current;
    if (!v) return;
    const doc = v.state.doc.toString();
    const mine = emitted.current.indexOf(value);
    if (doc === value || mine !== -1) {
      emitted.current = doc === value ? [] : emitted.current.slice(mine + 1);
      return;
    }
    emitted.current = [];
    v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value }, annotations: External.of(true) });
  }, [value]);

  useEffect(() => {
    view.current?.dispatch({
      effects: editable.current.reconfigure(editableExtensions(readOnly)),
    });
  }, [readOnly]);

  function openPicker() {
    const range = view.current?.state.selection.main;
    setPicker({ from: range?.from ?? value.length, to: range?.to ?? value.length });
  }

  /** Insert ``path`` as the language writes it over the picker's range; the caret after it. */
  function pick(path: string) {
    const v = view.current;
    const at = pickerRef.current;
    setPicker(null);
    if (!v || !at || language === "json") return;
    const insert = language === "template" ? `{{ ${path} }}` : path;
    v.dispatch({ changes: { from: at.from, to: at.to, insert }, selection: { anchor: at.from + insert.length }, userEvent: "input" });
    v.focus();
  }

  const known = props.knownErrors ?? [];
  const shown = unshownProblems(problems, known);
  return (
    <div className={`code-editor${assisted ? " code-editor--assisted" : ""}`} data-language={language}>
      {/* Keys typed here are the editor's: the canvas must not delete nodes on Backspace. */}
      <div ref={host} className="code-editor-host" onKeyDown={(e) => e.stopPropagation()} />
      {assisted && (
        <button type="button" className="code-editor__vars" title="Insert a variable (or type {{ in a template)"
          aria-label={`Insert a variable into ${props.ariaLabel ?? "this field"}`} aria-expanded={picker !== null}
          onClick={() => (picker ? setPicker(null) : openPicker())}>
          {"{x}"}
        </button>
      )}
      {assisted && picker && (
        <VariablePicker id={`${id}-vars`} variables={assist.variables} onPick={pick} typed={picker.typed} keys={pickerKeys}
          onClose={() => { setPicker(null); view.current?.focus(); }} />
      )}
      {shown.length > 0 && (
        <ul className="code-editor-problems" aria-live="polite" id={`${id}-problems`}>
          {shown.map((p, i) => (
            <li key={i}>{p}</li>
          ))}
        </ul>
      )}
      {checkFailed && <p className="code-editor-note">{checkFailed}</p>}
      {assisted && (language === "expression" || language === "template") && (
        <ValuePreview id={`${id}-preview`} graphId={assist.graphId} language={language} source={value} state={assist.state} stateLabel={assist.stateLabel} />
      )}
    </div>
  );
}
