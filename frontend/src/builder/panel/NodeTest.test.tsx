// Test node: the state sent, the result shown, and the confirmation a tool not safe to repeat needs.
import { act, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { updateNode } from "../spec";
import { initialTestState } from "./NodeTest";
import { SidePanel } from "./SidePanel";
import { KINDS } from "../../test/fixtures/nodeKinds";
import { renderInBuilder, sampleSpec, scriptFetch } from "./testing";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

describe("Test node", () => {
  it("prefills the state with the state keys and input properties", () => {
    expect(initialTestState(sampleSpec())).toEqual({ ticket: null, priority: 3, notes: [] });
  });

  it("prefills the keys nodes before this one write, empty in the shape they will have", () => {
    const spec = sampleSpec();
    spec.nodes.push({ id: "ask2", kind: "llm", config: { prompt: "x", output_key: "facts", output_schema: { type: "object" } } });
    spec.edges = [
      { source: "start", target: "ask" },
      { source: "ask", target: "calc" },
      { source: "calc", target: "mail" },
      { source: "ask2", target: "end" },
      { source: "mail", target: "end" },
    ];
    // ask writes its kind's default key (llm: reply, from the catalogue) as text; calc its set keys.
    expect(initialTestState(spec, "mail", KINDS)).toEqual({ ticket: null, priority: 3, notes: [], reply: "", score: null });
    // ask2 is not before mail; before end, its structured reply is an object.
    expect(initialTestState(spec, "end", KINDS)).toMatchObject({ reply: "", score: null, facts: {} });
    expect(initialTestState(spec, "ask", KINDS)).toEqual({ ticket: null, priority: 3, notes: [] });
  });

  it("runs a transform with the given state and shows output, usage and cost", async () => {
    const calls = scriptFetch(({ url }) =>
      url.includes("/test/")
        ? [200, { run_id: 41, status: "succeeded", output: { score: 6 }, error: null, usage: { input_tokens: 0, output_tokens: 0 }, cost_usd: "0" }]
        : [200, { ok: true, errors: [] }],
    );
    const user = userEvent.setup();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["calc"] }, graphId: 12 });
    await user.click(screen.getByRole("button", { name: "Test node" }));
    await user.click(screen.getByRole("button", { name: "Run test" }));
    await screen.findByText("succeeded");
    const test = calls.find((c) => c.url.includes("/test/"))!;
    expect(test.url).toBe("/api/v1/graphs/12/nodes/calc/test/");
    expect(test.body).toEqual({
      state: { ticket: null, priority: 3, notes: [] },
      node: { id: "calc", kind: "transform", config: { set: { score: "priority * 2" } } },
      confirm: false,
    });
    expect(screen.getByText(/"score": 6/)).toBeTruthy();
    expect(screen.getByText("$0")).toBeTruthy();
    expect(screen.getByRole("link", { name: "#41" }).getAttribute("href")).toBe("/runs/41/");
  });

  it("tests the node as edited, before the draft is saved", async () => {
    const calls = scriptFetch(({ url }) =>
      url.includes("/test/") ? [200, { run_id: 43, status: "succeeded", output: {}, error: null, usage: null, cost_usd: "0" }] : [200, { ok: true, errors: [] }],
    );
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["calc"] } });
    act(() => harness.api().change((s) => updateNode(s, "calc", { config: { set: { score: "priority * 100" } } }), "edit"));
    await user.click(screen.getByRole("button", { name: "Test node" }));
    await user.click(screen.getByRole("button", { name: "Run test" }));
    await screen.findByText("succeeded");
    const test = calls.find((c) => c.url.includes("/test/"))!;
    expect((test.body as { node: unknown }).node).toEqual({ id: "calc", kind: "transform", config: { set: { score: "priority * 100" } } });
  });

  it("asks before testing a tool that is not safe to repeat, then sends confirm", async () => {
    const calls = scriptFetch(({ url, body }) => {
      if (!url.includes("/test/")) return [200, { ok: true, errors: [] }];
      if (!(body as { confirm: boolean }).confirm) {
        return [428, { error: { code: "confirmation_required", message: "send_email is not safe to repeat.", fields: {} } }];
      }
      return [200, { run_id: 42, status: "failed", output: null, error: { code: "tool_error", message: "SMTP refused" }, usage: null, cost_usd: null }];
    });
    const user = userEvent.setup();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["mail"] } });
    await user.click(screen.getByRole("button", { name: "Test node" }));
    await user.click(screen.getByRole("button", { name: "Run test" }));
    const dialog = await screen.findByRole("alertdialog");
    expect(dialog.textContent).toContain("send_email is not safe to repeat.");
    expect(calls.filter((c) => c.url.includes("/test/"))).toHaveLength(1);
    await user.click(screen.getByRole("button", { name: "Run it anyway" }));
    await screen.findByText("SMTP refused");
    const tests = calls.filter((c) => c.url.includes("/test/"));
    expect(tests.map((c) => (c.body as { confirm: boolean }).confirm)).toEqual([false, true]);
  });

  it("cancelling the confirmation sends nothing more", async () => {
    const calls = scriptFetch(({ url }) =>
      url.includes("/test/") ? [409, { error: { code: "confirmation_required", message: "Not safe to repeat." } }] : [200, { ok: true, errors: [] }],
    );
    const user = userEvent.setup();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["mail"] } });
    await user.click(screen.getByRole("button", { name: "Test node" }));
    await user.click(screen.getByRole("button", { name: "Run test" }));
    await screen.findByRole("alertdialog");
    await user.click(screen.getByRole("button", { name: "Cancel" }));
    await waitFor(() => expect(screen.queryByRole("alertdialog")).toBeNull());
    expect(calls.filter((c) => c.url.includes("/test/"))).toHaveLength(1);
  });

  it("shows a refused test's error", async () => {
    scriptFetch(({ url }) =>
      url.includes("/test/") ? [400, { error: { code: "invalid", message: "Node calc is not in the saved draft." } }] : [200, { ok: true, errors: [] }],
    );
    const user = userEvent.setup();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["calc"] } });
    await user.click(screen.getByRole("button", { name: "Test node" }));
    await user.click(screen.getByRole("button", { name: "Run test" }));
    expect((await screen.findByRole("alert")).textContent).toContain("Node calc is not in the saved draft.");
  });
});
