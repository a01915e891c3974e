// Node forms offer registered tools and the chosen provider's models.
import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { resetChoices } from "./choices";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch } from "./testing";

vi.setConfig({ testTimeout: 30_000 });
beforeEach(() => resetChoices());
afterEach(() => vi.unstubAllGlobals());

const catalogues = () =>
  scriptFetch(({ url }) => {
    if (url.endsWith("/tools/")) return [200, { tools: [{ name: "send_email", description: "Send an email", args_schema: {}, repeat_safe: false }] }];
    if (url.endsWith("/models/"))
      return [
        200,
        {
          providers: [
            { provider: "mock", models: [{ id: "mock-1", name: "Mock" }], source: "none", accepts_any_model: true },
            { provider: "openai", models: [{ id: "gpt-4o-mini", name: "GPT-4o mini" }], source: "price_library", accepts_any_model: true },
          ],
        },
      ];
    return [200, { ok: true, errors: [] }];
  });

const optionValues = (inputId: string) =>
  [...(document.getElementById(`${inputId}__choices`)?.querySelectorAll("option") ?? [])].map((o) => o.getAttribute("value"));

describe("catalogue choices in node forms", () => {
  it("offers the registered tools on a tool node", async () => {
    catalogues();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["mail"] } });
    await waitFor(() => expect(optionValues("config.tool")).toEqual(["send_email"]));
    // The chosen tool is described under the field.
    expect(screen.getByText("send_email — Send an email", { selector: ".field-help" })).toBeTruthy();
  });

  it("offers the chosen provider's models, and any value still goes", async () => {
    catalogues();
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["ask"] } });
    await waitFor(() => expect(optionValues("config.provider")).toEqual(["mock", "openai"]));
    expect(optionValues("config.model")).toEqual(["mock-1"]);
    await user.type(document.getElementById("config.provider")!, "openai");
    await waitFor(() => expect(optionValues("config.model")).toEqual(["gpt-4o-mini"]));
    await user.type(document.getElementById("config.model")!, "my-local-model");
    expect(harness.api().spec.nodes[3]?.config).toMatchObject({ provider: "openai", model: "my-local-model" });
  });

  it("says when the chosen provider has no API key set", async () => {
    scriptFetch(({ url }) => {
      if (url.endsWith("/providers/")) return [200, [{ name: "mock", ready: true }, { name: "openai", ready: false }]];
      if (url.endsWith("/models/"))
        return [200, { providers: [{ provider: "mock", models: [], source: "none", accepts_any_model: true }, { provider: "openai", models: [], source: "none", accepts_any_model: true }] }];
      return [200, { ok: true, errors: [], tools: [] }];
    });
    const user = userEvent.setup();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["ask"] } });
    await waitFor(() => expect(optionValues("config.provider")).toEqual(["mock", "openai"]));
    await user.type(document.getElementById("config.provider")!, "openai");
    expect(await screen.findByText("openai — no API key set (Providers page)", { selector: ".field-help" })).toBeTruthy();
  });
});
