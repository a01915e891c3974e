import { screen, within } from "@testing-library/react";
import { cursorPage, makeContext, page, renderWith, stubFetch } from "../shell/testing";
import Home from "./Home";

afterEach(() => vi.unstubAllGlobals());

describe("Home", () => {
  it("tells a new builder how to create or import a graph", async () => {
    stubFetch({ "GET /api/v1/graphs/": () => ({ body: page([]) }), "GET /api/v1/runs/": () => ({ body: cursorPage([]) }) });
    renderWith(<Home />, makeContext({ build: true, operate: true }));
    const graphs = screen.getByRole("region", { name: "Graphs" });
    expect(await within(graphs).findByText("No graphs yet")).toBeTruthy();
    expect(within(graphs).getByRole("button", { name: "Create your first graph" })).toBeTruthy();
    expect(screen.getByRole("button", { name: "Import JSON" })).toBeTruthy();
    // The graphs page's order: Import JSON, then New graph (the primary action) on the right.
    const header = document.querySelector(".page-actions")!;
    expect([...header.querySelectorAll("button")].map((b) => b.textContent)).toEqual(["Import JSON", "New graph"]);
    expect(await screen.findByText("No runs yet")).toBeTruthy();
  });

  it("offers no create or import to a user who may not build", async () => {
    stubFetch({ "GET /api/v1/graphs/": () => ({ body: page([]) }), "GET /api/v1/runs/": () => ({ body: cursorPage([]) }) });
    renderWith(<Home />, makeContext({ approve: true }));
    expect(await screen.findByText("A builder creates graphs; they will appear here.")).toBeTruthy();
    expect(screen.queryByRole("button", { name: /graph|Import/ })).toBeNull();
  });

  it("lists graphs and the latest runs with links", async () => {
    stubFetch({
      "GET /api/v1/graphs/": () => ({ body: page([{ id: 3, name: "triage", description: "", latest_version: 2, created_by: null, created_at: "2026-12-01T10:00:00Z", updated_at: "2026-12-01T10:00:00Z" }]) }),
      "GET /api/v1/runs/": () => ({ body: cursorPage([{ id: 8, graph: 3, graph_name: "triage", version: 2, status: "succeeded", error: null, step_count: 3, input_tokens: 0, output_tokens: 0, cost_usd: "0", created_by: "olu", created_at: "2026-12-01T10:00:00Z", started_at: null, finished_at: null }]) }),
    });
    renderWith(<Home />, makeContext({}));
    expect((await screen.findAllByRole("link", { name: "triage" }))[0]!.getAttribute("href")).toBe("/graphs/3/");
    const latest = screen.getByRole("region", { name: "Latest runs" });
    expect((await within(latest).findByRole("link", { name: "#8" })).getAttribute("href")).toBe("/runs/8/");
  });
});
