import { screen, within } from "@testing-library/react";
import { makeContext, renderWith, stubFetch } from "../shell/testing";
import type { RunDetail } from "../shell/types";
import RunPage, { errorText } from "./RunPage";

afterEach(() => vi.unstubAllGlobals());

const run: RunDetail = {
  id: 5, graph: 2, graph_name: "divide", version: 3, status: "failed",
  error: { code: "expression", message: "division by zero", node_id: "boom" },
  step_count: 2, input_tokens: 10, output_tokens: 5, cost_usd: "0.001200", created_by: "olu",
  created_at: "2026-12-01T10:00:00Z", started_at: "2026-12-01T10:00:00Z", finished_at: "2026-12-01T10:00:02Z",
  input: { x: 1 }, state: {}, output: null,
  steps: [
    { id: 1, parent: null, node_id: "start", kind: "start", iteration: 0, status: "succeeded", attempt: 1, max_attempts: 1, output: {}, error: null,
      cost_usd: null, started_at: "2026-12-01T10:00:00Z", finished_at: "2026-12-01T10:00:00.500Z" },
    { id: 2, parent: null, node_id: "boom", kind: "transform", iteration: 0, status: "failed", attempt: 2, max_attempts: 3, output: null,
      error: { message: "division by zero" }, cost_usd: "0.001200", started_at: "2026-12-01T10:00:01Z", finished_at: "2026-12-01T10:00:02Z" },
  ],
};

describe("RunPage", () => {
  it("shows status, version, input, error and each step with attempts, duration and cost", async () => {
    stubFetch({ "GET /api/v1/runs/5/": () => ({ body: run }) });
    renderWith(<RunPage runId={5} />, makeContext({}, "run"));
    const heading = await screen.findByRole("heading", { name: /Run #5/ });
    expect(heading.textContent).toContain("failed");
    expect(screen.getByRole("link", { name: "Open graph" }).getAttribute("href")).toBe("/graphs/2/");
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
