import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { NewGraphDialog } from "../shell/GraphDialogs";
import { makeContext, page, renderWith, stubFetch } from "../shell/testing";
import type { GraphSummary } from "../api/types";
import { graphSummary } from "../test/factories";
import GraphList from "./GraphList";

afterEach(() => vi.unstubAllGlobals());

const g = (id: number, name: string, latest: number | null = 1): GraphSummary =>
  graphSummary({ id, name, latest_version: latest, created_by: "bea" });

describe("GraphList", () => {
  it("shows no edit controls to a user who may not build, but lets them export", async () => {
    stubFetch({ "GET /api/v1/graphs/": () => ({ body: page([g(1, "triage")]) }) });
    renderWith(<GraphList />, makeContext({ approve: true }, "graphs"));
    await screen.findByRole("link", { name: "triage" });
    expect(screen.getByRole("button", { name: "Export triage" })).toBeTruthy();
    for (const name of ["New graph", "Import JSON", "Duplicate triage", "Delete triage"]) {
      expect(screen.queryByRole("button", { name })).toBeNull();
    }
  });

  it("puts Import JSON before New graph, as the home page does, and keeps a date on one line", async () => {
    stubFetch({ "GET /api/v1/graphs/": () => ({ body: page([g(1, "triage")]) }) });
    const { container } = renderWith(<GraphList />, makeContext({ build: true }, "graphs"));
    await screen.findByRole("link", { name: "triage" });
    const header = container.querySelector(".page-actions")!;
    expect([...header.querySelectorAll("button")].map((b) => b.textContent)).toEqual(["Import JSON", "New graph"]);
    const updated = within(screen.getByRole("table")).getAllByRole("cell")[2]!;
    expect(updated.className).toContain("nowrap");
  });

  it("shows the server's reason when a delete is refused, and keeps the graph", async () => {
    const user = userEvent.setup();
    stubFetch({
      "GET /api/v1/graphs/": () => ({ body: page([g(7, "pinned")]) }),
      "DELETE /api/v1/graphs/7/": () => ({ status: 409, body: { error: { code: "protected", message: "Still in use: runs are pinned to this object's versions; it cannot be deleted.", fields: {} } } }),
    });
    renderWith(<GraphList />, makeContext({ build: true }, "graphs"));
    await user.click(await screen.findByRole("button", { name: "Delete pinned" }));
    const dialog = screen.getByRole("dialog", { name: "Delete “pinned”?" });
    await user.click(within(dialog).getByRole("button", { name: "Delete graph" }));
    expect((await within(dialog).findByRole("alert")).textContent).toContain("Still in use: runs are pinned");
    expect(within(dialog).queryByRole("button", { name: "Delete graph" })).toBeNull();
    await user.keyboard("{Escape}");
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(screen.getByRole("link", { name: "pinned" })).toBeTruthy();
  });

  it("duplicates under a new name and reloads the list", async () => {
    const user = userEvent.setup();
    let graphs = [g(1, "triage")];
    const calls = stubFetch({
      "GET /api/v1/graphs/": () => ({ body: page(graphs) }),
      "POST /api/v1/graphs/1/duplicate/": (c) => {
        const copy = g(2, (c.body as { name: string }).name, null);
        graphs = [...graphs, copy];
        return { status: 201, body: copy };
      },
    });
    renderWith(<GraphList />, makeContext({ build: true }, "graphs"));
    await user.click(await screen.findByRole("button", { name: "Duplicate triage" }));
    const name = screen.getByLabelText("Name of the copy");
    expect((name as HTMLInputElement).value).toBe("triage copy");
    await user.clear(name);
    await user.type(name, "triage-2");
    await user.click(screen.getByRole("button", { name: "Duplicate" }));
    expect(await screen.findByRole("link", { name: "triage-2" })).toBeTruthy();
    expect(screen.getByRole("status").textContent).toContain("Duplicated as “triage-2”");
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({ name: "triage-2" });
  });

  it("shows an API error's message instead of an empty page", async () => {
    stubFetch({ "GET /api/v1/graphs/": () => ({ status: 500, body: { error: { code: "server_error", message: "Internal server error.", fields: {} } } }) });
    renderWith(<GraphList />, makeContext({ build: true }, "graphs"));
    expect((await screen.findByRole("alert")).textContent).toContain("Internal server error.");
    expect(screen.getByRole("button", { name: "Try again" })).toBeTruthy();
  });

  it("has an empty state that offers to create the first graph", async () => {
    stubFetch({ "GET /api/v1/graphs/": () => ({ body: page([]) }) });
    renderWith(<GraphList />, makeContext({ build: true }, "graphs"));
    expect(await screen.findByText("No graphs yet")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Create your first graph" })).toBeTruthy();
  });

  it("searches by name", async () => {
    const user = userEvent.setup();
    const calls = stubFetch({ "GET /api/v1/graphs/": (c) => ({ body: page(c.path.includes("search=zzz") ? [] : [g(1, "triage")]) }) });
    renderWith(<GraphList />, makeContext({}, "graphs"));
    await screen.findByRole("link", { name: "triage" });
    await user.type(screen.getByRole("searchbox", { name: "Search graphs" }), "zzz");
    expect(await screen.findByText("No graph matches “zzz”.")).toBeTruthy();
    expect(calls.at(-1)!.path).toContain("search=zzz");
  });
});

describe("NewGraphDialog", () => {
  it("creates the graph with Start connected to End and hands it on", async () => {
    const user = userEvent.setup();
    const calls = stubFetch({ "POST /api/v1/graphs/": (c) => ({ status: 201, body: g(9, (c.body as { name: string }).name, null) }) });
    const onCreated = vi.fn();
    renderWith(<NewGraphDialog onClose={() => {}} onCreated={onCreated} />, makeContext({ build: true }));
    await user.type(screen.getByLabelText("Name"), "support-triage");
    await user.click(screen.getByRole("button", { name: "Create and open" }));
    await waitFor(() => expect(onCreated).toHaveBeenCalledWith(expect.objectContaining({ id: 9, name: "support-triage" })));
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({ name: "support-triage", description: "", draft: {
      version: 1, name: "support-triage", description: "",
      nodes: [
        { id: "start", kind: "start", config: {}, position: { x: 0, y: 0 } },
        { id: "end", kind: "end", config: {}, position: { x: 520, y: 0 } },
      ],
      edges: [{ source: "start", target: "end" }],
    } });
  });

  it("starts from an example picked in the dialog, renamed", async () => {
    const user = userEvent.setup();
    const calls = stubFetch({ "POST /api/v1/graphs/": (c) => ({ status: 201, body: g(9, (c.body as { name: string }).name, null) }) });
    const onCreated = vi.fn();
    renderWith(<NewGraphDialog onClose={() => {}} onCreated={onCreated} />, makeContext({ build: true }));
    await user.click(await screen.findByRole("radio", { name: /Refund agent/ }));
    // Picking an example names an unnamed graph after it.
    expect((screen.getByLabelText("Name") as HTMLInputElement).value).toBe("refund-agent");
    await user.click(screen.getByRole("button", { name: "Create and open" }));
    await waitFor(() => expect(onCreated).toHaveBeenCalled());
    const body = calls.find((c) => c.method === "POST")!.body as { name: string; draft: { name: string; nodes: { kind: string }[] } };
    expect(body.name).toBe("refund-agent");
    expect(body.draft.name).toBe("refund-agent");
    expect(body.draft.nodes.length).toBe(15);
  });

  it("shows a taken name on the field", async () => {
    const user = userEvent.setup();
    stubFetch({ "POST /api/v1/graphs/": () => ({ status: 409, body: { error: { code: "name_taken", message: "A graph named 'x' already exists.", fields: { name: ["A graph with this name already exists."] } } } }) });
    renderWith(<NewGraphDialog onClose={() => {}} onCreated={() => {}} />, makeContext({ build: true }));
    await user.type(screen.getByLabelText("Name"), "x");
    await user.click(screen.getByRole("button", { name: "Create and open" }));
    expect((await screen.findByRole("alert")).textContent).toBe("A graph with this name already exists.");
    expect(screen.getByLabelText("Name").getAttribute("aria-invalid")).toBe("true");
  });
});
