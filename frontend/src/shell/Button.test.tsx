import { render, screen } from "@testing-library/react";
import { Button, ButtonLink, buttonClass } from "./Button";

describe("Button", () => {
  it("is a non-submitting button with the variant's and size's classes", () => {
    render(<form><Button variant="primary" size="small" className="extra">Publish</Button></form>);
    const b = screen.getByRole("button", { name: "Publish" });
    expect(b.getAttribute("type")).toBe("button");
    expect(b.className).toBe("btn btn-primary btn-small extra");
  });

  it("submits only when told to", () => {
    render(<form><Button type="submit" variant="danger">Delete</Button></form>);
    expect(screen.getByRole("button", { name: "Delete" }).getAttribute("type")).toBe("submit");
  });

  it("takes its name from aria-label when it shows only an icon", () => {
    render(<Button icon variant="ghost" aria-label="Dismiss">✕</Button>);
    const b = screen.getByRole("button", { name: "Dismiss" });
    expect(b.className).toBe("btn btn-ghost btn-icon");
  });

  it("draws a link as a button and keeps it a link", () => {
    render(<ButtonLink href="/api/v1/audit/export/?format=csv" download size="small">Export CSV</ButtonLink>);
    const a = screen.getByRole("link", { name: "Export CSV" });
    expect(a.getAttribute("href")).toBe("/api/v1/audit/export/?format=csv");
    expect(a.hasAttribute("download")).toBe(true);
    expect(a.className).toBe("btn btn-small");
  });

  it("gives anything else the same look", () => {
    expect(buttonClass()).toBe("btn");
    expect(buttonClass("danger-ghost")).toBe("btn btn-danger-ghost");
    expect(buttonClass("link", "normal", "", false)).toBe("btn btn-link");
  });
});
