import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { cursorPage, makeContext, renderWith, stubFetch } from "../shell/testing";
import type { RunSummary } from "../api/types";
import RunList from "./RunList";

afterEach(() => vi.unstubAllGlobals());

const run = (id: number): RunSummary => ({
  id, graph: 3, graph_name: `graph-${id}`, version: 1, status: "succeeded", error: null, step_count: 2, input_tokens: 0,
  output_tokens: 0, cost_usd: "0", created_by: "olu", created_at: "2026-12-01T10:00:00Z", started_at: null, finished_at: null,
} as RunSummary);

describe("RunList", () => {
  it("names who started a run as its page does: the user, else the command line", async () => {
    const cli = { ...run(6), created_by: null, started_from: "command line" } as RunSummary;
    const nobody = { ...run(7), created_by: null, started_from: null } as RunSummary;
    stubFetch({ "GET /api/v1/runs/": () => ({ body: cursorPage([nobody, cli, run(5)], null) }) });
    const { container } = renderWith(<RunList />, makeContext({}, "runs"));
    await screen.findByText("graph-6");
    const column = screen.getAllByRole("columnheader").findIndex((th) => th.textContent === "Started by");
    const startedBy = (id: number) => container.querySelector(`tr[data-run="${id}"]`)!.children[column]!.textContent;
    expect([startedBy(5), startedBy(6), startedBy(7)]).toEqual(["olu", "command line", "—"]);
  });

  it("pages by the API's cursor links, not by page numbers", { timeout: 30_000 }, async () => {
    const user = userEvent.setup();
    const calls = stubFetch({
      "GET /api/v1/runs/": (call) => call.path.includes("cursor=older")
        ? { body: cursorPage([run(1)], null, "http://testserver/api/v1/runs/?cursor=newer&page_size=50") }
        : { body: cursorPage([run(3), run(2)], "http://testserver/api/v1/runs/?cursor=older&page_size=50") },
    });
    renderWith(<RunList />, makeContext({}, "runs"));
    await screen.findByText("graph-3");
    expect(calls.find((c) => c.path.startsWith("/api/v1/runs/"))!.path).toBe("/api/v1/runs/?page_size=50");
    const runCalls = () => calls.filter((c) => c.path.startsWith("/api/v1/runs/"));
    await user.click(screen.getByRole("button", { name: "Older" }));
    await screen.findByText("graph-1");
    // The next URL is followed as given (its cursor), on this origin.
    expect(runCalls()[1]!.path).toBe("/api/v1/runs/?page_size=50&cursor=older");
    expect(screen.getByText("Page 2")).toBeTruthy();
    expect((screen.getByRole("button", { name: "Older" }) as HTMLButtonElement).disabled).toBe(true);
    await user.click(screen.getByRole("button", { name: "Newer" }));
    expect(runCalls()[2]!.path).toBe("/api/v1/runs/?page_size=50&cursor=newer");
  });

  it("ticks any run: compare wants exactly two, bulk cancel sends only the ones that can still be cancelled", { timeout: 30_000 }, async () => {
    const user = userEvent.setup();
    const live = { ...run(5), status: "waiting" } as RunSummary;
    const calls = stubFetch({
      "GET /api/v1/runs/": () => ({ body: cursorPage([live, run(4)], null) }),
      "POST /api/v1/runs/cancel/": () => ({ body: { results: [{ run: 5, ok: true, status: "cancelled", error: null }], cancelled: 1, refused: 0 } }),
    });
    renderWith(<RunList />, makeContext({ operate: true }, "runs"));
    await screen.findByText("graph-5");
    const compare = () => screen.getByRole("button", { name: /^Compare/ }) as HTMLButtonElement;
    expect(compare().disabled).toBe(true);
    await user.click(screen.getByLabelText("Select run 5"));
    await user.click(screen.getByLabelText("Select run 4"));
    expect(compare().textContent).toBe("Compare #5 and #4");
    expect(compare().disabled).toBe(false);
    // Run 4 has succeeded: only run 5 is cancelled.
    await user.click(screen.getByRole("button", { name: "Cancel selected (1)" }));
    await user.click(await screen.findByRole("button", { name: "Cancel 1 run" }));
    await screen.findByText("1 cancelled.");
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({ runs: [5], reason: "" });
  });
});
