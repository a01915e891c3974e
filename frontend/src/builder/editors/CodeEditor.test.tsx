// CodeEditor: server checks shown inline and cleared when fixed, check failures, completions of state keys.
import { CompletionContext, currentCompletions, startCompletion } from "@codemirror/autocomplete";
import { forceLinting } from "@codemirror/lint";
import { jinja } from "@codemirror/lang-jinja";
import { EditorState } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { act, render, screen, waitFor } from "@testing-library/react";
import { useState } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { scriptFetch } from "../panel/testing";
import { CodeEditor, expressionCompletions, templateCompletions } from "./CodeEditor";
import { offsetOf } from "./check";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

function Controlled({ initial, language }: { initial: string; language: "expression" | "template" }) {
  const [value, setValue] = useState(initial);
  return <CodeEditor id="ed" value={value} onChange={setValue} language={language} names={["priority", "ticket"]} ariaLabel="Condition" />;
}

function viewOf(id: string): EditorView {
  const view = EditorView.findFromDOM(document.getElementById(id)!);
  if (!view) throw new Error("no editor");
  return view;
}

function replaceAll(view: EditorView, text: string) {
  act(() => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text }, userEvent: "input.type" }));
}

describe("CodeEditor", () => {
  it("checks the source with the server and shows its errors inline until fixed", async () => {
    const calls = scriptFetch(({ body }) => {
      const source = (body as { source: string }).source;
      return source.includes("prority")
        ? [200, { ok: false, errors: [{ message: "unknown variable 'prority'", line: 1, column: 1 }] }]
        : [200, { ok: true, errors: [] }];
    });
    render(<Controlled initial="priority > 2" language="expression" />);
    const view = viewOf("ed");
    replaceAll(view, "prority > 2");
    act(() => forceLinting(view));
    await screen.findByText("line 1, column 1: unknown variable 'prority'");
    await waitFor(() => expect(document.querySelector(".cm-lintRange-error")).not.toBeNull());
    const last = calls.at(-1)!;
    expect(last.url).toBe("/api/v1/expressions/check/");
    expect(last.method).toBe("POST");
    expect(last.body).toEqual({ kind: "expression", source: "prority > 2", state_keys: ["priority", "ticket"] });

    replaceAll(view, "priority > 2");
    act(() => forceLinting(view));
    await waitFor(() => expect(screen.queryByText(/unknown variable/)).toBeNull());
    expect(calls.at(-1)!.body).toMatchObject({ source: "priority > 2" });
  });

  it("checks templates as templates", async () => {
    const calls = scriptFetch(() => [200, { ok: false, errors: [{ message: "unexpected '}'", line: 2, column: 4 }] }]);
    render(<Controlled initial="Hi" language="template" />);
    const view = viewOf("ed");
    replaceAll(view, "Hi\n{{ }}}");
    act(() => forceLinting(view));
    await screen.findByText("line 2, column 4: unexpected '}'");
    expect(calls.at(-1)!.body).toMatchObject({ kind: "template", source: "Hi\n{{ }}}" });
  });

  it("says so when the check cannot run, and stays editable", async () => {
    scriptFetch(() => [503, { error: { code: "unavailable", message: "Checker is down." } }]);
    render(<Controlled initial="a" language="expression" />);
    const view = viewOf("ed");
    replaceAll(view, "a + 1");
    act(() => forceLinting(view));
    await screen.findByText("Checker is down.");
    expect(view.state.readOnly).toBe(false);
  });

  it("offers the graph's state keys as completions in the editor", async () => {
    scriptFetch(() => [200, { ok: true, errors: [] }]);
    render(<Controlled initial="" language="expression" />);
    const view = viewOf("ed");
    replaceAll(view, "ti");
    act(() => view.dispatch({ selection: { anchor: 2 } }));
    act(() => {
      startCompletion(view);
    });
    await waitFor(() => expect(currentCompletions(view.state).map((c) => c.label)).toContain("ticket"));
  });

  it("expression completions: state keys and keywords, not after a dot", () => {
    const source = expressionCompletions(["priority", "ticket"]);
    const at = (doc: string) => source(new CompletionContext(EditorState.create({ doc }), doc.length, false));
    const result = at("pri");
    expect(result?.from).toBe(0);
    expect(result?.options.map((o) => o.label)).toEqual(expect.arrayContaining(["priority", "ticket", "and"]));
    expect(at("input.pri")).toBeNull();
  });

  it("template completions: state keys inside {{ }}", () => {
    const source = templateCompletions(["priority", "ticket"]);
    const doc = "Hello {{ tic";
    const state = EditorState.create({ doc, extensions: [jinja()] });
    const result = source(new CompletionContext(state, doc.length, true));
    expect(result?.options.map((o) => o.label)).toContain("ticket");
  });

  it("maps 1-based line and column to offsets", () => {
    expect(offsetOf("ab\ncd", 2, 2)).toBe(4);
    expect(offsetOf("ab", null, null)).toBe(0);
    expect(offsetOf("ab", 9, 9)).toBe(2);
  });
});

describe("CodeEditor with a lagging value", () => {
  it("keeps later keystrokes when an older value of its own arrives late, and follows a real outside change", () => {
    scriptFetch(() => [200, { ok: true, errors: [] }]);
    const onChange = vi.fn();
    const { rerender } = render(<CodeEditor id="lag" value="a" onChange={onChange} language="expression" />);
    const view = viewOf("lag");
    act(() => view.dispatch({ changes: { from: 1, insert: "b" }, userEvent: "input.type" }));
    act(() => view.dispatch({ changes: { from: 2, insert: "c" }, userEvent: "input.type" }));
    expect(onChange.mock.calls.map((c) => c[0])).toEqual(["ab", "abc"]);
    // The parent renders the first of our values late: the editor keeps "abc".
    rerender(<CodeEditor id="lag" value="ab" onChange={onChange} language="expression" />);
    expect(view.state.doc.toString()).toBe("abc");
    rerender(<CodeEditor id="lag" value="abc" onChange={onChange} language="expression" />);
    // An undo elsewhere sets a value the editor never emitted: it is applied, without an echo.
    rerender(<CodeEditor id="lag" value="a" onChange={onChange} language="expression" />);
    expect(view.state.doc.toString()).toBe("a");
    expect(onChange).toHaveBeenCalledTimes(2);
  });
});
