// The API tokens page: a new token's key is shown once in a dialog with a copy button; revoking asks first.
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { makeContext, page, renderWith, stubFetch } from "../shell/testing";
import type { ApiTokenRow } from "../api/types";
import Tokens from "./Tokens";

afterEach(() => vi.unstubAllGlobals());

const ROW: ApiTokenRow = {
  id: 4, name: "CI", prefix: "bal_abcdefgh", user: "ada", created_at: "2026-12-01T10:00:00Z", created_by: "ada",
  last_used_at: null, revoked_at: null, revoked_by: "",
};

describe("Tokens page", () => {
  it("shows a new key once, with a copy button, and never in the list", async () => {
    const rows: ApiTokenRow[] = [];
    const calls = stubFetch({
      "GET /api/v1/tokens/": () => ({ body: page(rows) }),
      "POST /api/v1/tokens/": (c) => {
        rows.push({ ...ROW, name: (c.body as { name: string }).name });
        return { status: 201, body: { ...rows[0], key: "bal_abcdefgh-the-secret" } };
      },
    });
    const user = userEvent.setup();
    renderWith(<Tokens />, makeContext({}, "tokens"));
    expect(await screen.findByText("No tokens yet")).toBeTruthy();
    await user.click(screen.getAllByRole("button", { name: "New token" })[0]!);
    await user.type(screen.getByLabelText("Name"), "deploy");
    expect(screen.queryByLabelText(/For user/)).toBeNull(); // only staff create for others
    await user.click(screen.getByRole("button", { name: "Create token" }));
    const dialog = await screen.findByRole("dialog", { name: "Token created" });
    expect((within(dialog).getByRole("textbox") as HTMLInputElement).value).toBe("bal_abcdefgh-the-secret");
    expect(within(dialog).getByText(/will not be shown again/)).toBeTruthy();
    expect(within(dialog).getByRole("button", { name: "Copy" })).toBeTruthy();
    expect(calls.find((c) => c.method === "POST")?.body).toEqual({ name: "deploy" });
    await user.click(within(dialog).getByRole("button", { name: "Done" }));
    const table = await screen.findByRole("table", { name: "API tokens" });
    expect(table.textContent).toContain("deploy");
    expect(document.body.textContent).not.toContain("the-secret");
  });

  it("revokes after a confirmation, and staff can list everyone's", async () => {
    const calls = stubFetch({
      "GET /api/v1/tokens/": () => ({ body: page([ROW]) }),
      "POST /api/v1/tokens/4/revoke/": () => ({ body: { ...ROW, revoked_at: "2026-12-02T10:00:00Z", revoked_by: "ada" } }),
    });
    const user = userEvent.setup();
    renderWith(<Tokens />, makeContext({ admin: true }, "tokens"));
    await user.click(await screen.findByRole("button", { name: "Revoke CI" }));
    expect(calls.some((c) => c.path.endsWith("/revoke/"))).toBe(false);
    await user.click(within(screen.getByRole("dialog")).getByRole("button", { name: "Revoke token" }));
    await waitFor(() => expect(calls.some((c) => c.path === "/api/v1/tokens/4/revoke/")).toBe(true));
    await user.click(screen.getByRole("button", { name: "Everyone's" }));
    await waitFor(() => expect(calls.at(-1)?.path).toBe("/api/v1/tokens/?page_size=500&all=true"));
  });
});
