// StartRunDialog: the input form from the input schema, the POST, validation and the server's refusal.
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sampleSpec, scriptFetch } from "../panel/testing";
import { StartRunDialog } from "./StartRunDialog";
import { startDraftRun } from "./draftRun";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

describe("StartRunDialog", () => {
  it("shows what a valid value looks like: each field's example as its placeholder, its description and pattern as help", () => {
    const spec = { ...sampleSpec(), name: "Refund agent", input_schema: {
      type: "object", required: ["order_id", "reason"], properties: {
        order_id: { type: "string", pattern: "^[A-Z]-[0-9]{4}$", description: "A capital letter, a hyphen and four digits.", examples: ["A-1002"] },
        reason: { type: "string", maxLength: 2000, examples: ["arrived broken", "never came"] },
        note: { type: "string", default: "none" },
      } } };
    render(<StartRunDialog graphId={4} spec={spec} onClose={vi.fn()} navigate={vi.fn()} />);
    const order = screen.getByLabelText(/order_id/);
    expect(order.getAttribute("placeholder")).toBe("e.g. A-1002");
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent).toContain("A capital letter, a hyphen and four digits.");
    expect(dialog.textContent).toContain("Must match ^[A-Z]-[0-9]{4}$.");
    expect(screen.getByLabelText(/reason/).getAttribute("placeholder")).toBe("e.g. arrived broken");
    expect(dialog.textContent).toContain("Examples: arrived broken, never came.");
  });


  it("builds the input form from the input schema, posts the run and opens its page", async () => {
    const calls = scriptFetch(() => [201, { id: 99, version: 2 }]);
    const navigate = vi.fn();
    const onClose = vi.fn();
    const user = userEvent.setup();
    render(<StartRunDialog graphId={4} spec={sampleSpec()} onClose={onClose} navigate={navigate} />);
    expect(screen.getByRole("dialog", { name: "Start a run of “Triage”" })).toBeTruthy();
    await user.type(screen.getByLabelText("ticket"), "Printer on fire");
    await user.clear(screen.getByLabelText("priority"));
    await user.type(screen.getByLabelText("priority"), "5");
    await user.click(screen.getByRole("button", { name: "Start run" }));
    await waitFor(() => expect(navigate).toHaveBeenCalledWith("/runs/99/"));
    expect(calls[0]).toEqual({ url: "/api/v1/runs/", method: "POST", body: { graph: 4, input: { ticket: "Printer on fire", priority: 5 } } });
    expect(onClose).toHaveBeenCalled();
  });

  it("runs the draft: posts to the draft's run action, hands the run over and stays on the page", async () => {
    const calls = scriptFetch(() => [201, { id: 12, status: "queued" }]);
    const navigate = vi.fn();
    const onStarted = vi.fn();
    const onClose = vi.fn();
    const user = userEvent.setup();
    render(<StartRunDialog graphId={4} spec={sampleSpec()} onClose={onClose} navigate={navigate}
      draftRun={{ start: (input) => startDraftRun(4, input), onStarted }} />);
    expect(screen.getByRole("dialog", { name: "Run the draft of “Triage”" })).toBeTruthy();
    await user.type(screen.getByLabelText("ticket"), "Printer on fire");
    await user.click(screen.getByRole("button", { name: "Run draft" }));
    await waitFor(() => expect(onStarted).toHaveBeenCalledWith({ id: 12, status: "queued" }));
    expect(calls[0]).toEqual({ url: "/api/v1/graphs/4/draft/run/", method: "POST", body: { input: { ticket: "Printer on fire", priority: 3 } } });
    expect(navigate).not.toHaveBeenCalled();
    expect(onClose).toHaveBeenCalled();
  });

  it("shows the draft run's input refusal on its field and starts nothing", async () => {
    scriptFetch(() => [400, { error: { code: "input_invalid", message: "The run input does not match the graph's input schema.", fields: { "input.ticket": ["must be at most 80 characters"] } } }]);
    const onStarted = vi.fn();
    const user = userEvent.setup();
    render(<StartRunDialog graphId={4} spec={sampleSpec()} onClose={vi.fn()} draftRun={{ start: (input) => startDraftRun(4, input), onStarted }} />);
    await user.type(screen.getByLabelText("ticket"), "x");
    await user.click(screen.getByRole("button", { name: "Run draft" }));
    expect(await screen.findByText("must be at most 80 characters")).toBeTruthy();
    expect(onStarted).not.toHaveBeenCalled();
  });

  it("starts from the draft's pinned test input and posts it", async () => {
    const calls = scriptFetch(() => [201, { id: 7 }]);
    const navigate = vi.fn();
    const user = userEvent.setup();
    render(<StartRunDialog graphId={4} spec={sampleSpec()} onClose={vi.fn()} navigate={navigate} initialInput={{ ticket: "Pinned", priority: 2 }} />);
    expect(screen.getByText(/Prefilled with the draft's pinned test input/)).toBeTruthy();
    expect((screen.getByLabelText("ticket") as HTMLInputElement).value).toBe("Pinned");
    await user.click(screen.getByRole("button", { name: "Start run" }));
    await waitFor(() => expect(navigate).toHaveBeenCalledWith("/runs/7/"));
    expect(calls[0]?.body).toEqual({ graph: 4, input: { ticket: "Pinned", priority: 2 } });
  });

  it("says where the form comes from, and puts Cancel first with Start run on the right", () => {
    scriptFetch(() => [201, { id: 1 }]);
    render(<StartRunDialog graphId={4} spec={sampleSpec()} onClose={vi.fn()} navigate={vi.fn()} />);
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent).toContain("These fields come from the graph's input schema (Graph settings → Input schema); nodes read a field as input.ticket.");
    const buttons = [...dialog.querySelectorAll(".run-dialog-buttons button")].map((b) => b.textContent);
    expect(buttons).toEqual(["Cancel", "Start run"]);
  });

  it("validates against the schema before posting", async () => {
    const calls = scriptFetch(() => [201, { id: 1 }]);
    const spec = { ...sampleSpec(), input_schema: { type: "object", required: ["ticket"], properties: { ticket: { type: "string", minLength: 3 } } } };
    const user = userEvent.setup();
    render(<StartRunDialog graphId={4} spec={spec} onClose={vi.fn()} navigate={vi.fn()} />);
    await user.click(screen.getByRole("button", { name: "Start run" }));
    await screen.findByText(/must have required property/);
    expect(calls).toHaveLength(0);
  });

  it("shows the server's refusal, on the field when it names one", async () => {
    scriptFetch(() => [400, { error: { code: "invalid", message: "Invalid input.", fields: { "input.ticket": ["is too short"] } } }]);
    const navigate = vi.fn();
    const user = userEvent.setup();
    render(<StartRunDialog graphId={4} spec={sampleSpec()} version={2} onClose={vi.fn()} navigate={navigate} />);
    await user.type(screen.getByLabelText("ticket"), "x");
    await user.click(screen.getByRole("button", { name: "Start run" }));
    expect((await screen.findByRole("alert")).textContent).toContain("Invalid input.");
    expect(screen.getByText("is too short")).toBeTruthy();
    expect(navigate).not.toHaveBeenCalled();
  });

  it("posts the chosen version, and closes on Escape", async () => {
    const calls = scriptFetch(() => [201, { id: 3 }]);
    const onClose = vi.fn();
    const user = userEvent.setup();
    const spec = { ...sampleSpec(), input_schema: { type: "object" } };
    render(<StartRunDialog graphId={4} spec={spec} version={2} onClose={onClose} navigate={vi.fn()} />);
    const json = screen.getByLabelText("Input (JSON object)");
    await user.clear(json);
    await user.type(json, '{{"a": 1}');
    await user.click(screen.getByRole("button", { name: "Start run" }));
    await waitFor(() => expect(calls).toHaveLength(1));
    expect(calls[0]!.body).toEqual({ graph: 4, version: 2, input: { a: 1 } });
    onClose.mockClear();
    render(<StartRunDialog graphId={4} spec={spec} onClose={onClose} navigate={vi.fn()} />);
    await user.keyboard("{Escape}");
    expect(onClose).toHaveBeenCalled();
  });

  it("free-form input: one heading, names the declared state keys, refuses bad JSON by the field", async () => {
    const calls = scriptFetch(() => [201, { id: 3 }]);
    const user = userEvent.setup();
    const spec = { ...sampleSpec(), input_schema: { type: "object" } };
    render(<StartRunDialog graphId={4} spec={spec} onClose={vi.fn()} navigate={vi.fn()} />);
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent?.match(/Input(?! schema)/g)?.length).toBe(1); // the box's label, no form title above it
    expect(dialog.textContent).toContain("input schema lists no fields, so type the run's input as a JSON object");
    expect(dialog.textContent).toContain("graph's state keys (notes) also sets its starting value");
    const json = screen.getByLabelText("Input (JSON object)");
    await user.clear(json);
    await user.type(json, "{{topic: 1}");
    expect(screen.getByRole("alert").textContent).toMatch(/Not valid JSON/);
    expect(json.getAttribute("aria-invalid")).toBe("true");
    await user.click(screen.getByRole("button", { name: "Start run" }));
    expect(calls).toHaveLength(0);
    await user.clear(json);
    await user.type(json, "[[1]");
    expect(screen.getByRole("alert").textContent).toContain("must be a JSON object");
  });
});
