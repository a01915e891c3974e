// The node picker component: typing filters, arrows and Enter pick, a click picks, Escape and a press outside close.
import { fireEvent, render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { NodeKindInfo } from "../api/types";
import { NodePicker } from "./NodePicker";

const k = (kind: string, title: string, inputs = ["in"]) => ({
  kind, title, description: `${title} node`, category: "data", config_schema: {}, inputs, outputs: [], optional_outputs: [],
  default_output: true, dynamic_outputs: false, repeat_safe: false, uses_repeat_safe: false, does_work: true, can_loop: true,
}) as NodeKindInfo;
const CATALOGUE = [k("start", "Start", []), k("transform", "Transform"), k("llm", "LLM"), k("tool", "Tool")];

function open(onPick = vi.fn(), onClose = vi.fn()) {
  render(
    <div>
      <button type="button">outside</button>
      <NodePicker catalogue={CATALOGUE} origin={{ nodeId: "start", handleId: null, type: "source" }} at={{ x: 10, y: 10 }}
        bounds={{ width: 900, height: 700 }} onPick={onPick} onClose={onClose} />
    </div>,
  );
  return { onPick, onClose };
}
const options = () => screen.getAllByRole("option").map((o) => o.getAttribute("data-kind"));

describe("NodePicker", () => {
  it("focuses its search, lists the kinds that fit after an output, and picks the first with Enter", async () => {
    const user = userEvent.setup();
    const { onPick } = open();
    const search = screen.getByRole("combobox", { name: "Search node kinds" });
    expect(document.activeElement).toBe(search);
    expect(options()).toEqual(["transform", "llm", "tool"]); // no Start after an output
    await user.type(search, "ll");
    expect(options()).toEqual(["llm"]);
    await user.keyboard("{Enter}");
    expect(onPick).toHaveBeenCalledWith(expect.objectContaining({ kind: "llm" }));
  });

  it("moves the highlight with the arrows (aria-activedescendant follows) and picks it", async () => {
    const user = userEvent.setup();
    const { onPick } = open();
    await user.keyboard("{ArrowDown}{ArrowDown}");
    const active = screen.getAllByRole("option").find((o) => o.getAttribute("aria-selected") === "true");
    expect(active?.getAttribute("data-kind")).toBe("tool");
    expect(screen.getByRole("combobox").getAttribute("aria-activedescendant")).toBe(active?.id);
    await user.keyboard("{ArrowDown}{Enter}"); // wraps round to the first
    expect(onPick).toHaveBeenCalledWith(expect.objectContaining({ kind: "transform" }));
  });

  it("says when nothing matches, and Enter then picks nothing", async () => {
    const user = userEvent.setup();
    const { onPick } = open();
    await user.type(screen.getByRole("combobox"), "zzz{Enter}");
    expect(screen.getByText("No node kind matches “zzz”.")).toBeTruthy();
    expect(onPick).not.toHaveBeenCalled();
  });

  it("picks on a click, closes on Escape and on a press outside", async () => {
    const user = userEvent.setup();
    const { onPick, onClose } = open();
    await user.click(screen.getByText("Tool"));
    expect(onPick).toHaveBeenCalledWith(expect.objectContaining({ kind: "tool" }));
    await user.keyboard("{Escape}");
    expect(onClose).toHaveBeenCalledTimes(1);
    fireEvent.pointerDown(screen.getByRole("button", { name: "outside" }));
    expect(onClose).toHaveBeenCalledTimes(2);
  });
});
