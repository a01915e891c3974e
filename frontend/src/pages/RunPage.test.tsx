import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { makeContext, renderWith, stubFetch } from "../shell/testing";
import type { RunDetail } from "../api/types";
import { runDetail, runStep } from "../test/factories";
import { errorText } from "../runs/JsonBlock";
import RunPage from "./RunPage";

afterEach(() => vi.unstubAllGlobals());
// The canvas is a lazy chunk with React Flow: on a loaded machine it takes seconds to mount in jsdom.
vi.setConfig({ testTimeout: 30_000 });
const slow = { timeout: 15_000 };

const run: RunDetail = runDetail({
  id: 5, graph: 2, graph_name: "divide", version: 3, status: "failed",
  error: { code: "expression", message: "division by zero", node_id: "boom" },
  step_count: 2, input_tokens: 10, output_tokens: 5, cost_usd: "0.001200", created_by: "olu",
  created_at: "2026-12-01T10:00:00Z", started_at: "2026-12-01T10:00:00Z", finished_at: "2026-12-01T10:00:02Z",
  input: { x: 1 }, state: {}, output: null,
  steps: [
    runStep({ id: 1, run: 5, node_id: "start", kind: "start", status: "succeeded", attempt: 1, max_attempts: 1, output: {},
      started_at: "2026-12-01T10:00:00Z", finished_at: "2026-12-01T10:00:00.500Z" }),
    runStep({ id: 2, run: 5, node_id: "boom", kind: "transform", status: "failed", attempt: 2, max_attempts: 3,
      error: { message: "division by zero" }, cost_usd: "0.001200", started_at: "2026-12-01T10:00:01Z", finished_at: "2026-12-01T10:00:02Z" }),
  ],
});

const spec = {
  name: "divide", nodes: [
    { id: "start", kind: "start", position: { x: 0, y: 0 } }, { id: "boom", kind: "transform", config: {}, position: { x: 260, y: 0 } },
    { id: "end", kind: "end", position: { x: 520, y: 0 } },
  ], edges: [{ source: "start", target: "boom" }, { source: "boom", target: "end" }],
};
const kinds = { kinds: ["start", "transform", "end"].map((kind) => ({ kind, title: kind, description: "", category: "flow", config_schema: {}, inputs: kind === "start" ? [] : ["in"], outputs: [], dynamic_outputs: false, repeat_safe: true })) };
const graphRoutes = { "GET /api/v1/runs/5/graph/": () => ({ body: { graph: 2, version: 3, is_test: false, spec } }), "GET /api/v1/node-kinds/": () => ({ body: kinds }) };

const boomDetail = {
  ...run.steps[1], run: 5, lease_owner: "", lease_expires_at: null, worker_alive: null, input: { x: 1, zero: 0 }, updates: null, usage: null,
  created_at: "2026-12-01T10:00:00.600Z", idempotency_key: "run-5-boom-0", child_key: "", depth: 1, available_at: null, due_at: null,
  dispatched_at: null, state_seq: null, price_version: "", children: [],
  attempts: [
    { number: 1, worker: "host:1:a", build: "0.1.0+3f9c2a1b7e04", status: "failed", error: { message: "division by zero" }, usage: null, cost_usd: null, started_at: "2026-12-01T10:00:01Z", finished_at: "2026-12-01T10:00:01.200Z" },
    { number: 2, worker: "host:2:b", build: "release-42", status: "failed", error: { message: "division by zero" }, usage: { input_tokens: 10, output_tokens: 5 }, cost_usd: "0.001200", started_at: "2026-12-01T10:00:01.500Z", finished_at: "2026-12-01T10:00:02Z" },
  ],
};
const startDetail = { ...boomDetail, ...run.steps[0], attempts: [], idempotency_key: "run-5-start-0", state_seq: 2, error: null };

describe("RunPage", () => {
  it("shows status, version, input, error and each step with attempts, duration and cost", async () => {
    stubFetch({ "GET /api/v1/runs/5/": () => ({ body: run }), ...graphRoutes });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    const heading = await screen.findByRole("heading", { name: /Run #5/ });
    expect(heading.textContent).toContain("failed");
    // The version the run ran, read-only (the builder links back to the draft).
    expect(screen.getByRole("link", { name: "Open graph" }).getAttribute("href")).toBe("/graphs/2/?version=3");
    expect(screen.getByText(/version 3/)).toBeTruthy();
    expect(screen.getByRole("link", { name: "v3" }).getAttribute("href")).toBe("/graphs/2/?version=3");
    expect(screen.getByRole("alert").textContent).toContain("The run failed at boom.");
    expect(screen.getByLabelText("Run input").textContent).toContain('"x": 1');
    const rows = within(screen.getByRole("region", { name: "Steps" })).getAllByRole("row");
    expect(rows).toHaveLength(3);
    expect(rows[2]!.textContent).toContain("2 / 3");
    expect(rows[2]!.textContent).toContain("1.0 s");
    expect(rows[2]!.textContent).toContain("$0.0012");
    expect(rows[1]!.textContent).toContain("500 ms");
  });

  it("draws the graph with each node's state, and a node never reached in a finished run as skipped", async () => {
    stubFetch({ "GET /api/v1/runs/5/": () => ({ body: run }), ...graphRoutes });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    // React Flow keeps nodes hidden until measured, which jsdom never does (the browser test checks them visible).
    // (and role queries over hidden elements are slow in jsdom: read the attributes).
    const node = (name: string) => document.querySelector(`.react-flow__node[role="group"][aria-label="${name}"]`);
    await waitFor(() => expect(node("node boom: failed")).toBeTruthy(), slow);
    expect(node("node boom: failed")!.querySelector(".bnode")?.getAttribute("data-state")).toBe("failed");
    expect(node("node start: succeeded")).toBeTruthy();
    expect(node("node end: skipped")).toBeTruthy();
    const bars = within(screen.getByRole("list", { name: "Timeline of steps" })).getAllByRole("listitem");
    expect(bars.map((b) => b.getAttribute("data-state"))).toEqual(["succeeded", "failed"]);
  });

  it("draws each attempt of a step as its own bar and the backoff between them, and times to the millisecond", async () => {
    const retried: RunDetail = { ...run, steps: [run.steps[0]!, { ...run.steps[1]!, attempts: [
      { number: 1, status: "failed", started_at: "2026-12-01T10:00:00.600Z", finished_at: "2026-12-01T10:00:00.700Z", error_code: "expression", retry_at: "2026-12-01T10:00:00.950Z" },
      { number: 2, status: "failed", started_at: "2026-12-01T10:00:01Z", finished_at: "2026-12-01T10:00:02Z", error_code: "expression", retry_at: null },
    ] } as RunDetail["steps"][number]] };
    stubFetch({ "GET /api/v1/runs/5/": () => ({ body: retried }), ...graphRoutes });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    const timeline = await screen.findByRole("list", { name: "Timeline of steps" });
    const boom = timeline.querySelector("[data-node='boom']")!;
    const attempts = [...boom.querySelectorAll(".timeline__attempt")];
    expect(attempts.map((a) => a.getAttribute("data-status"))).toEqual(["failed", "failed"]);
    expect(attempts[0]!.getAttribute("title")).toMatch(/^boom · attempt 1 of 3: failed \(expression\) · \d\d:\d\d:\d\d\.\d{3} → \d\d:\d\d:\d\d\.\d{3}, 100 ms · \+0\.600 s from run start$/);
    expect(boom.querySelector(".timeline__backoff")?.textContent).toBe("backoff 250 ms");
    // The steps table: boom started 1 s after the run, to the millisecond.
    const row = within(screen.getByRole("region", { name: "Steps" })).getAllByRole("row")[2]!;
    expect(row.querySelector("time")?.textContent).toMatch(/^\d\d:\d\d:\d\d\.000$/);
    expect(row.querySelector(".when__rel")?.textContent).toBe("+1.000 s");
  });

  it("opens the inspector from a timeline bar: attempts with their worker, build and cost, the idempotency key, the input state, the error", async () => {
    const calls = stubFetch({
      "GET /api/v1/runs/5/": () => ({ body: run }), ...graphRoutes, "GET /api/v1/steps/2/": () => ({ body: boomDetail }),
      "GET /api/v1/steps/2/state/": () => ({ body: { step: 2, seq: null, previous_step: null, input_state: { x: 1, zero: 0 }, state: null, changed: {} } }),
    });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    fireEvent.click(await screen.findByRole("button", { name: /^Inspect boom: failed/ }));
    const inspector = await screen.findByRole("complementary", { name: "Step inspector" });
    await within(inspector).findByRole("table", { name: "Attempts" }, slow);
    const attempts = within(within(inspector).getByRole("table", { name: "Attempts" })).getAllByRole("row");
    expect(attempts).toHaveLength(3);
    expect(attempts[2]!.textContent).toContain("host:2:b");
    expect(attempts[2]!.textContent).toContain("$0.0012");
    // Each attempt names the build that ran it: after a deploy one step can show two.
    expect(attempts[1]!.textContent).toContain("build 0.1.0+3f9c2a1b7e04");
    expect(attempts[2]!.textContent).toContain("build release-42");
    expect(within(inspector).getByLabelText("Idempotency key").textContent).toBe("run-5-boom-0");
    expect(within(inspector).getByLabelText("Worker").textContent).toBe("host:2:b");
    expect((await within(inspector).findByLabelText("Step input")).textContent).toContain('"zero": 0');
    expect(within(inspector).getByText("The step failed: it changed no state.")).toBeTruthy();
    // The page knows the step is a top-level one: its detail and its state are asked for together.
    expect(calls.filter((c) => c.path.startsWith("/api/v1/steps/2/")).map((c) => c.path.split("?")[0])).toEqual(["/api/v1/steps/2/", "/api/v1/steps/2/state/"]);
    // Not allowed to fork (GET actions/ answered nothing): no fork button.
    expect(within(inspector).queryByRole("button", { name: /Fork from this step/ })).toBeNull();
  });

  it("shows the state after a committed step and what it changed", async () => {
    stubFetch({
      "GET /api/v1/runs/5/": () => ({ body: run }), ...graphRoutes, "GET /api/v1/steps/1/": () => ({ body: startDetail }),
      "GET /api/v1/steps/1/state/": () => ({ body: { step: 1, seq: 2, previous_step: null, input_state: { zero: 0 }, state: { x: 1, zero: 0 }, changed: { x: { before: null, after: 1, added: true } } } }),
    });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    fireEvent.click(await screen.findByRole("button", { name: "Inspect step start" }));
    const diff = await screen.findByRole("table", { name: "State difference" }, slow);
    expect(within(diff).getAllByRole("row")[1]!.getAttribute("data-change")).toBe("added");
    expect(within(diff).getAllByRole("row")[1]!.textContent).toContain("x");
    expect(screen.getByLabelText("State after this step").textContent).toContain("zero");
    expect(screen.getByLabelText("Step input").textContent).not.toContain('"x"');
  });

  it("opens the fork dialog on the inspected step from its Fork from this step button", async () => {
    const done = { ...run, status: "succeeded", error: null, steps: [run.steps[0]!, { ...run.steps[1]!, status: "succeeded", error: null, attempt: 1 }] };
    const allowed = { may_act: true, status: "succeeded", cancel: { allowed: false, reason: "" }, resume: { allowed: false, reason: "" }, retry: { allowed: false, reason: "" }, fork: { allowed: true, reason: "" } };
    const calls = stubFetch({
      "GET /api/v1/runs/5/": () => ({ body: done }), ...graphRoutes, "GET /api/v1/runs/5/actions/": () => ({ body: allowed }),
      "GET /api/v1/steps/1/": () => ({ body: startDetail }),
      "GET /api/v1/steps/1/state/": () => ({ body: { step: 1, seq: 2, previous_step: null, input_state: { x: 1 }, state: { x: 1 }, changed: {} } }),
      "POST /api/v1/runs/5/fork/preview/": () => ({ status: 400, body: { error: { code: "invalid", message: "stop here", fields: {} } } }),
    });
    renderWith(<RunPage runId={5} />, makeContext({ operate: true }, "run"));
    fireEvent.click(await screen.findByRole("button", { name: "Inspect step start" }));
    const inspector = await screen.findByRole("complementary", { name: "Step inspector" });
    fireEvent.click(await within(inspector).findByRole("button", { name: "Fork from this step…" }, slow));
    const dialog = await screen.findByRole("dialog", { name: /Fork run #5/ });
    expect((within(dialog).getByLabelText("Fork after step") as HTMLSelectElement).value).toBe("1");  // not the default (the last committed step, 2)
    await waitFor(() => expect(calls.some((c) => c.path === "/api/v1/runs/5/fork/preview/" && (c.body as { step: number }).step === 1)).toBe(true));
    fireEvent.click(within(dialog).getByRole("button", { name: /Close|Cancel/ }));
    await waitFor(() => expect(screen.queryByRole("dialog", { name: /Fork run #5/ })).toBeNull());
    // Closed, the header's own Fork… opens on the default step again (the inspector's request is spent).
    fireEvent.click(screen.getByRole("button", { name: "Fork…" }));
    const again = await screen.findByRole("dialog", { name: /Fork run #5/ });
    expect((within(again).getByLabelText("Fork after step") as HTMLSelectElement).value).toBe("2");
  });

  it("says a node-test run is a test of its node from the builder and draws that node alone, offering no retry", async () => {
    const test: RunDetail = {
      ...run, version: 0, is_test: true, tested_node: "boom", fork_origin: null, status: "succeeded", error: null,
      steps: [{ ...run.steps[1]!, id: 7, status: "succeeded", error: null }, { ...run.steps[0]!, id: 8, node_id: "test_end", kind: "end" }],
    };
    const harness = { ...spec, nodes: [spec.nodes[1], { id: "test_end", kind: "end", config: { output: [] } }], edges: [{ source: "boom", target: "test_end" }] };
    const allowed = Object.fromEntries(["cancel", "resume", "retry", "fork"].map((a) => [a, { allowed: false, reason: "A test of one node from the builder." }]));
    const calls = stubFetch({
      "GET /api/v1/runs/5/": () => ({ body: test }), "GET /api/v1/runs/5/graph/": () => ({ body: { graph: 2, version: 0, is_test: true, spec: harness } }),
      "GET /api/v1/node-kinds/": () => ({ body: kinds }), "GET /api/v1/runs/5/actions/": () => ({ body: { ...allowed, may_act: true, status: "succeeded" } }),
    });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    await screen.findByRole("heading", { name: /Test run #5/ });
    const subtitle = document.querySelector(".page-subtitle")!.textContent!;
    expect(subtitle).toContain("A test of node boom of graph divide");
    expect(subtitle).toContain("not a published version");
    expect(subtitle).not.toMatch(/version 0/);
    expect(screen.getByRole("link", { name: "builder test" }).getAttribute("href")).toBe("/graphs/2/");
    expect(screen.getByRole("link", { name: "Open graph in the builder" }).getAttribute("href")).toBe("/graphs/2/");
    expect(screen.queryByText("v0")).toBeNull();
    const node = (name: string) => document.querySelector(`.react-flow__node[role="group"][aria-label="${name}"]`);
    await waitFor(() => expect(node("node boom: succeeded")).toBeTruthy(), slow);
    expect(document.querySelector('.react-flow__node[aria-label^="node test_end"]')).toBeNull();
    // The harness's end step is no step of the user's graph: not listed, not on the timeline.
    expect(screen.getByRole("region", { name: "Steps" }).textContent).not.toContain("test_end");
    expect(within(screen.getByRole("list", { name: "Timeline of steps" })).getAllByRole("listitem")).toHaveLength(1);
    expect(screen.getByText("Steps", { selector: "dt" }).nextElementSibling?.textContent).toBe("1");
    expect(calls.some((c) => c.path.includes("/versions/"))).toBe(false);
    expect(screen.queryByRole("button", { name: /Retry|Fork|Resume|Compare/ })).toBeNull();
  });

  it("says a draft run is a run of the graph's draft, not a test of some node", async () => {
    const draft: RunDetail = { ...run, version: 0, is_test: true, tested_node: null, fork_origin: null, status: "succeeded", error: null };
    stubFetch({
      "GET /api/v1/runs/5/": () => ({ body: draft }), "GET /api/v1/runs/5/graph/": () => ({ body: { graph: 2, version: 0, is_test: true, spec } }),
      "GET /api/v1/node-kinds/": () => ({ body: kinds }), "GET /api/v1/runs/5/actions/": () => ({ body: { may_act: true, status: "succeeded" } }),
    });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    await screen.findByRole("heading", { name: /Test run #5/ });
    const subtitle = document.querySelector(".page-subtitle")!.textContent!;
    expect(subtitle).toContain("A run of the draft of graph divide");
    expect(subtitle).not.toContain("?");
    expect(screen.getByRole("heading", { name: /Graph the draft as it was run/ })).toBeTruthy();
  });

  it("says where a fork came from and draws the nodes it kept as kept, not as not taken", async () => {
    const fork: RunDetail = {
      ...run, id: 5, status: "succeeded", error: null, forked_from: 1, forked_from_step: 11,
      fork_origin: { run: 1, step: 11, node_id: "boom", kept_nodes: ["start", "boom"] },
      steps: [{ ...run.steps[0]!, id: 21, node_id: "end", kind: "end" }],
    };
    stubFetch({ "GET /api/v1/runs/5/": () => ({ body: fork }), ...graphRoutes });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    await screen.findByRole("heading", { name: /Run #5/ });
    expect(document.querySelector(".page-subtitle")!.textContent).toContain("Forked from run #1 (at boom)");
    expect(screen.getByRole("link", { name: "run #1" }).getAttribute("href")).toBe("/runs/1/?step=11");
    expect(within(screen.getByRole("list", { name: "Node states" })).getByText("kept from run #1")).toBeTruthy();
    const node = (name: string) => document.querySelector(`.react-flow__node[role="group"][aria-label="${name}"]`);
    await waitFor(() => expect(node("node boom: kept")).toBeTruthy(), slow);
    expect(node("node start: kept")).toBeTruthy();
    expect(node("node end: succeeded")).toBeTruthy();
  });

  it("says a run the CLI started was started from the command line", async () => {
    stubFetch({ "GET /api/v1/runs/5/": () => ({ body: { ...run, created_by: null, started_from: "command line" } }) });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    await screen.findByRole("heading", { name: /Run #5/ });
    expect(screen.getByText("Started by").nextElementSibling?.textContent).toBe("command line");
  });

  it("shows the API's error for an unknown run", async () => {
    stubFetch({});
    renderWith(<RunPage runId={99} />, makeContext({}, "run"));
    expect((await screen.findByRole("alert")).textContent).toContain("Run 99 could not be loaded.");
  });

  it("words engine errors", () => {
    expect(errorText({ type: "ValueError", message: "bad" })).toBe("ValueError: bad");
    expect(errorText("plain")).toBe("plain");
    expect(errorText(null)).toBe("");
  });
});
