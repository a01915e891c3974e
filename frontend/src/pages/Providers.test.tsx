// The providers page: whether each provider's key is set, a connection test's outcome, and a key rotation that sends only the key.
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { makeContext, renderWith, stubFetch } from "../shell/testing";
import type { ProviderRow } from "../api/types";
import Providers from "./Providers";

afterEach(() => vi.unstubAllGlobals());

const ROWS: ProviderRow[] = [
  { name: "openai", kind: "openai", label: "OpenAI", models: [], default_model: null, base_url: "https://api.openai.com/v1", source: "settings", ready: false },
  { name: "team", kind: "anthropic", label: "team (Anthropic)", models: [], default_model: "claude-x", base_url: null, source: "app", ready: true },
];

describe("Providers page", () => {
  it("says which keys are set, tests a connection and rotates a stored key", async () => {
    const calls = stubFetch({
      "GET /api/v1/providers/": () => ({ body: ROWS }),
      "POST /api/v1/providers/team/test/": () => ({ body: { ok: false, provider: "team", model: "claude-x", message: "invalid x-api-key", latency_ms: 12, error: { code: "auth", status: 401 } } }),
      "PATCH /api/v1/providers/team/": () => ({ body: ROWS[1] }),
    });
    const user = userEvent.setup();
    renderWith(<Providers />, makeContext({ admin: true }, "providers"));
    const openai = (await screen.findByText("openai")).closest("tr")!;
    expect(within(openai).getByText("No key")).toBeTruthy();
    expect(within(openai).queryByRole("button", { name: /Rotate|Remove/ })).toBeNull(); // settings: changed there
    const team = screen.getByText("team").closest("tr")!;
    expect(within(team).getByText("Key set")).toBeTruthy();
    await user.click(within(team).getByRole("button", { name: "Test connection of team" }));
    expect((await within(team).findByRole("status")).textContent).toContain("Failed");
    expect(within(team).getByRole("status").textContent).toContain("invalid x-api-key");
    await user.click(within(team).getByRole("button", { name: "Rotate key of team" }));
    await user.type(screen.getByLabelText("New API key"), "sk-new");
    await user.click(screen.getByRole("button", { name: "Replace key" }));
    await waitFor(() => expect(calls.find((c) => c.method === "PATCH")?.body).toEqual({ api_key: "sk-new" }));
  });
});
