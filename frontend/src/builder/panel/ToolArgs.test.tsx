// A tool node's arguments: named template fields from the picked tool's schema; a readable tool picker.
import { act, screen, waitFor } from "@testing-library/react";
import { EditorView } from "@codemirror/view";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import userEvent from "@testing-library/user-event";
import { argumentExample, argumentFields } from "../editors/ToolArgsField";
import { docSummary, resetChoices } from "./choices";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch } from "./testing";

vi.setConfig({ testTimeout: 30_000 });
beforeEach(() => resetChoices());
afterEach(() => vi.unstubAllGlobals());

const KB_SEARCH = {
  name: "kb_search",
  description: "Search the demo help-centre articles by keyword.",
  args_schema: {
    type: "object",
    properties: {
      query: { type: "string", title: "Query", maxLength: 2000, description: "Words to look for" },
      limit: { type: "integer", title: "Limit", default: 2, minimum: 1, maximum: 10 },
    },
    required: ["query"],
  },
  repeat_safe: true,
};

const SEND_EMAIL = {
  name: "send_email",
  description: "Send a plain-text email from DEFAULT_FROM_EMAIL through the configured EMAIL_BACKEND.\n\nReturns ``{\"message_id\": str}``.",
  args_schema: {
    type: "object",
    additionalProperties: false,
    properties: { to: { type: "array", items: { type: "string" }, title: "To" }, subject: { type: "string", title: "Subject" } },
    required: ["to", "subject"],
  },
  repeat_safe: false,
};

const OPEN_TOOL = {
  name: "open_tool",
  description: "Takes anything.",
  args_schema: { type: "object", additionalProperties: true, properties: { query: { type: "string" } } },
  repeat_safe: true,
};

const catalogues = () =>
  scriptFetch(({ url }) => {
    if (url.endsWith("/tools/")) return [200, { tools: [KB_SEARCH, SEND_EMAIL, OPEN_TOOL] }];
    if (url.endsWith("/models/")) return [200, { providers: [] }];
    return [200, { ok: true, errors: [] }];
  });

function editorView(id: string): EditorView {
  const content = document.getElementById(id);
  const view = content ? EditorView.findFromDOM(content) : null;
  if (!view) throw new Error(`#${id} is not in a CodeMirror editor`);
  return view;
}

function specWith(args: Record<string, unknown>, tool = "kb_search") {
  const spec = sampleSpec();
  spec.nodes[4] = { id: "mail", kind: "tool", config: { tool, args } };
  return spec;
}

describe("tool arguments", () => {
  it("shows the picked tool's arguments as named template fields, required marked, description as help", async () => {
    catalogues();
    const { harness } = renderInBuilder(<SidePanel />, { spec: specWith({}), selection: { nodes: ["mail"] } });
    await waitFor(() => expect(document.getElementById("config.args.query")).toBeTruthy());
    // pydantic's default (extra keys ignored) offers no rows for other arguments.
    expect(screen.queryByRole("button", { name: "Add argument" })).toBeNull();
    const query = document.querySelector('label[for="config.args.query"]');
    expect(query?.textContent).toBe("Query *");
    expect(document.querySelector('label[for="config.args.limit"]')?.textContent).toBe("Limit");
    expect(screen.getByText("Words to look for")).toBeTruthy();
    // No generic key/value rows ("newKey") for a tool whose arguments are known.
    expect(screen.queryByText(/newKey/)).toBeNull();
    // Each field is a template editor; typing writes args.query.
    const view = editorView("config.args.query");
    act(() => view.dispatch({ changes: { from: 0, insert: "{{ topic }}" }, userEvent: "input.type" }));
    await waitFor(() => expect(harness.api().spec.nodes[4]?.config.args).toEqual({ query: "{{ topic }}" }));
    expect(editorView("config.args.limit").state.doc.toString()).toBe("");
  });

  it("offers extra argument rows only when the tool's schema allows them, and never hides keys it refuses", async () => {
    catalogues();
    renderInBuilder(<SidePanel />, { spec: specWith({ to: "{{ ticket }}", cc: "x@example.com" }, "send_email"), selection: { nodes: ["mail"] } });
    await waitFor(() => expect(document.getElementById("config.args.subject")).toBeTruthy());
    expect(screen.queryByRole("button", { name: "Add argument" })).toBeNull();
    // cc is not an argument of send_email: shown with a way out, not dropped.
    expect(screen.getByText("cc")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Remove cc" })).toBeTruthy();
  });

  it("a tool that takes other keys (additionalProperties: true) gets rows under the named fields", async () => {
    catalogues();
    renderInBuilder(<SidePanel />, { spec: specWith({ query: "x", extra: "{{ ticket }}" }, "open_tool"), selection: { nodes: ["mail"] } });
    await waitFor(() => expect(screen.getByRole("button", { name: "Add argument" })).toBeTruthy());
    expect(editorView("config.args.extra").state.doc.toString()).toBe("{{ ticket }}");
    expect(editorView("config.args.query").state.doc.toString()).toBe("x");
  });

  it("argumentFields: help says allowed values and non-text types, the default is the placeholder", () => {
    const fields = argumentFields({
      properties: { method: { type: "string", enum: ["GET", "POST"], default: "GET" }, timeout: { type: "number", title: "Timeout", default: 30 } },
      required: [],
    });
    expect(fields).toEqual([
      { name: "method", title: "method", required: false, help: ["One of: GET, POST."], placeholder: "default: GET", structured: null },
      { name: "timeout", title: "Timeout", required: false, help: ["A number."], placeholder: "default: 30", structured: null },
    ]);
  });
});

describe("structured arguments", () => {
  it("an object argument can be typed as JSON instead of a template, and back", async () => {
    const user = userEvent.setup();
    scriptFetch(({ url }) => {
      if (url.endsWith("/tools/"))
        return [200, { tools: [{ name: "http", description: "", repeat_safe: false, args_schema: { type: "object", properties: { url: { type: "string" }, headers: { type: "object", additionalProperties: { type: "string" } } } } }] }];
      if (url.endsWith("/models/")) return [200, { providers: [] }];
      return [200, { ok: true, errors: [] }];
    });
    const { harness } = renderInBuilder(<SidePanel />, { spec: specWith({}, "http"), selection: { nodes: ["mail"] } });
    await waitFor(() => expect(document.getElementById("config.args.headers")).toBeTruthy());
    // An example for a field without a default is a whole-value template, not "Summarise ...".
    expect(document.querySelector('[id="config.args.url"]')?.closest(".cm-editor")?.textContent).toContain("e.g. {{");
    await user.click(screen.getByRole("button", { name: "Type an object as JSON instead" }));
    expect(harness.api().spec.nodes[4]?.config.args).toEqual({ headers: {} });
    await user.click(screen.getByRole("button", { name: "Use a template instead" }));
    expect(harness.api().spec.nodes[4]?.config.args).toEqual({});
  });

  it("argumentExample names the state key named like the argument, else any key, else the run input's field", () => {
    expect(argumentExample("query", ["input", "query", "topic"])).toBe("e.g. {{ query }}");
    expect(argumentExample("url", ["input", "topic"])).toBe("e.g. {{ topic }}");
    expect(argumentExample("url", ["input"])).toBe("e.g. {{ input.url }}");
  });
});

describe("tool picker labels", () => {
  it("docSummary keeps the first sentence of the first paragraph, without reST markup", () => {
    expect(docSummary(SEND_EMAIL.description)).toBe("Send a plain-text email from DEFAULT_FROM_EMAIL through the configured EMAIL_BACKEND.");
    expect(docSummary("Call ``x`` via :mod:`runs.tools.outbound` and\nreturn it. More here.")).toBe("Call x via runs.tools.outbound and return it.");
    expect(docSummary("Search articles, e.g. by keyword.")).toBe("Search articles, e.g. by keyword.");
  });

  it("the picker's options use the summary", async () => {
    catalogues();
    renderInBuilder(<SidePanel />, { spec: specWith({}, "send_email"), selection: { nodes: ["mail"] } });
    await waitFor(() => expect(document.getElementById("config.tool__choices")).toBeTruthy());
    const labels = [...document.getElementById("config.tool__choices")!.querySelectorAll("option")].map((o) => o.textContent);
    expect(labels).toContain("send_email — Send a plain-text email from DEFAULT_FROM_EMAIL through the configured EMAIL_BACKEND.");
  });
});
