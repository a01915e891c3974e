import { fireEvent, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { activeSection, TopBar } from "./TopBar";
import { makeContext, renderWith, stubFetch } from "./testing";

afterEach(() => vi.unstubAllGlobals());

describe("TopBar", () => {
  it("shows Graphs and Runs to everyone and Users and Admin only to staff", () => {
    const { unmount } = renderWith(<TopBar path="/" />, makeContext({ approve: true }));
    const nav = screen.getByRole("navigation", { name: "Main" });
    expect(within(nav).getByRole("link", { name: "Graphs" })).toHaveProperty("href", expect.stringMatching(/\/graphs\/$/));
    expect(within(nav).getByRole("link", { name: "Runs" })).toBeTruthy();
    expect(within(nav).queryByRole("link", { name: "Admin" })).toBeNull();
    expect(within(nav).queryByRole("link", { name: "Users" })).toBeNull();
    expect(within(nav).queryByRole("link", { name: "Providers" })).toBeNull();
    expect(within(nav).queryByRole("link", { name: "MCP servers" })).toBeNull();
    expect(screen.getByRole("link", { name: "Ballast" }).getAttribute("href")).toBe("/");
    unmount();
    renderWith(<TopBar path="/users/" />, makeContext({ admin: true, build: true }));
    expect(screen.getByRole("link", { name: "Admin" }).getAttribute("href")).toBe("/admin/");
    expect(screen.getByRole("link", { name: "Users" }).getAttribute("aria-current")).toBe("page");
    expect(screen.getByRole("link", { name: "Providers" }).getAttribute("href")).toBe("/providers/");
    expect(screen.getByRole("link", { name: "MCP servers" }).getAttribute("href")).toBe("/mcp-servers/");
  });

  it("shows Costs to everyone, Audit to staff and Workers to staff and operators", () => {
    const { unmount } = renderWith(<TopBar path="/costs/" />, makeContext({ approve: true }));
    const nav = screen.getByRole("navigation", { name: "Main" });
    expect(within(nav).getByRole("link", { name: "Costs" }).getAttribute("aria-current")).toBe("page");
    expect(within(nav).queryByRole("link", { name: "Audit" })).toBeNull();
    expect(within(nav).queryByRole("link", { name: "Workers" })).toBeNull();
    unmount();
    const { unmount: gone } = renderWith(<TopBar path="/" />, makeContext({ operate: true, workers: true }));
    expect(screen.getByRole("link", { name: "Workers" }).getAttribute("href")).toBe("/workers/");
    expect(screen.queryByRole("link", { name: "Audit" })).toBeNull();
    gone();
    renderWith(<TopBar path="/audit/" />, makeContext({ admin: true, audit: true, workers: true }));
    expect(screen.getByRole("link", { name: "Audit" }).getAttribute("aria-current")).toBe("page");
  });

  it("marks the current section", () => {
    renderWith(<TopBar path="/runs/12/" />, makeContext({}));
    expect(screen.getByRole("link", { name: "Runs" }).getAttribute("aria-current")).toBe("page");
    expect(screen.getByRole("link", { name: "Graphs" }).getAttribute("aria-current")).toBeNull();
    expect(activeSection("/", [{ href: "/" }, { href: "/graphs/" }])).toBe("/");
    expect(activeSection("/graphs/3/", [{ href: "/" }, { href: "/graphs/" }])).toBe("/graphs/");
  });

  it("shows the approvals waiting on the phone's Menu button too, where the Approvals link is folded away", async () => {
    stubFetch({ "GET /api/v1/approvals/inbox/counts/": () => ({ body: { assigned: 2, group: 1, decided: 0, waiting: 3 } }) });
    renderWith(<TopBar path="/" />, makeContext({ approve: true }));
    const menu = await screen.findByRole("button", { name: "Menu, 3 approvals waiting" });
    expect(menu.querySelector(".topnav-count")?.textContent).toBe("3");
  });

  it("renders nothing for an anonymous visitor", () => {
    const { container } = renderWith(<TopBar path="/" />, makeContext(null));
    expect(container.innerHTML).toBe("");
  });

  it("opens a keyboard-usable user menu with API tokens, password change and a POST sign-out carrying the CSRF token", async () => {
    const user = userEvent.setup();
    renderWith(<TopBar path="/" />, makeContext({ approve: true }));
    const button = screen.getByRole("button", { name: /Ada/ });
    expect(button.getAttribute("aria-expanded")).toBe("false");
    await user.click(button);
    const menu = screen.getByRole("menu", { name: "Account" });
    const items = within(menu).getAllByRole("menuitem");
    expect(items.map((i) => i.textContent)).toEqual(["API tokens", "Change password", "Sign out"]);
    expect(items[0]!.getAttribute("href")).toBe("/tokens/");
    expect(document.activeElement).toBe(items[0]);
    await user.keyboard("{ArrowDown}{ArrowDown}");
    expect(document.activeElement).toBe(items[2]);
    const form = items[2]!.closest("form")!;
    expect(form.getAttribute("method")).toBe("post");
    expect(form.getAttribute("action")).toBe("/accounts/logout/");
    expect((form.querySelector("input[name=csrfmiddlewaretoken]") as HTMLInputElement).value).toBe("csrf-test-token");
    fireEvent.keyDown(menu, { key: "Escape" });
    expect(screen.queryByRole("menu")).toBeNull();
    expect(document.activeElement).toBe(button);
  });
});
