// The live-connection line: what it says in each connection state, and on a page that polls meanwhile.
import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { LiveStatus, liveLabel } from "./ui";

describe("liveLabel", () => {
  it("names each connection state", () => {
    expect(liveLabel("open")).toBe("Live");
    expect(liveLabel("connecting")).toBe("Connecting…");
    expect(liveLabel("reconnecting")).toBe("Reconnecting…");
    expect(liveLabel("closed")).toBe("Not live");
  });
});

describe("LiveStatus", () => {
  it("says the page refreshes by itself once its socket failed, where it polls", () => {
    render(<LiveStatus connection="reconnecting" pollSeconds={3} />);
    expect(screen.getByRole("status").textContent).toBe("Refreshing every 3 s");
  });

  it("keeps Connecting… and Live on a polling page", () => {
    const { rerender } = render(<LiveStatus connection="connecting" pollSeconds={3} />);
    expect(screen.getByRole("status").textContent).toBe("Connecting…");
    rerender(<LiveStatus connection="open" pollSeconds={3} />);
    expect(screen.getByRole("status").textContent).toBe("Live");
  });

  it("says Reconnecting… where the page does not poll", () => {
    render(<LiveStatus connection="reconnecting" />);
    expect(screen.getByRole("status").textContent).toBe("Reconnecting…");
  });
});
