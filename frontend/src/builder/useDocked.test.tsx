// The collapsible docks: open on a first visit, then as the user left them in this browser.
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it } from "vitest";
import { DockHide, DockRail, useDocked } from "./useDocked";

function Dock() {
  const [open, setOpen] = useDocked("palette");
  return open ? <div><DockHide side="left" label="Node kinds" onHide={() => setOpen(false)} />palette</div>
    : <DockRail side="left" label="Node kinds" onOpen={() => setOpen(true)} />;
}

afterEach(() => window.localStorage.clear());

describe("useDocked", () => {
  it("opens by default, hides to a rail, and a new page keeps what the user chose", async () => {
    const user = userEvent.setup();
    const first = render(<Dock />);
    expect(screen.getByText("palette")).toBeTruthy();
    await user.click(screen.getByRole("button", { name: "Hide node kinds" }));
    expect(screen.queryByText("palette")).toBeNull();
    expect(screen.getByRole("complementary", { name: "Node kinds (hidden)" })).toBeTruthy();
    first.unmount();
    const second = render(<Dock />);
    expect(screen.queryByText("palette")).toBeNull();
    await user.click(screen.getByRole("button", { name: "Show node kinds" }));
    expect(screen.getByText("palette")).toBeTruthy();
    second.unmount();
    render(<Dock />);
    expect(screen.getByText("palette")).toBeTruthy();
  });
});
