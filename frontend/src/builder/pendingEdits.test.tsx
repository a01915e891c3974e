// Typed-but-uncommitted field text counts as an unsaved change: the status says so and the leave guard holds.
import { act, fireEvent, render, renderHook, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { examplePlaceholder } from "./editors/formContext";
import { hasPendingEdits } from "./pendingEdits";
import { StateKeysEditor } from "./panel/StateKeysEditor";
import type { GraphSpec } from "./spec";
import { useAutosave } from "./useAutosave";

afterEach(() => vi.unstubAllGlobals());

describe("pending field edits", () => {
  it("a state key name typed but not blurred marks the draft unsaved and guards leaving", async () => {
    const user = userEvent.setup();
    const onChange = vi.fn();
    render(<StateKeysEditor state={{ key: { reducer: "replace" } }} readOnly={false} onChange={onChange} errors={{}} />);
    const spec: GraphSpec = { name: "g", nodes: [], edges: [] } as unknown as GraphSpec;
    const { result } = renderHook(() => useAutosave(1, spec, { spec, revision: 1 }, true));
    expect(result.current.status).toBe("saved");
    const row = screen.getByRole("group", { name: "State key key" });
    const nameInput = within(row).getByLabelText("Key");
    await user.clear(nameInput);
    await user.type(nameInput, "total");
    expect(onChange).not.toHaveBeenCalled(); // committed on blur, not yet
    expect(hasPendingEdits()).toBe(true);
    expect(result.current.status).toBe("unsaved");
    const leave = new Event("beforeunload", { cancelable: true });
    window.dispatchEvent(leave);
    expect(leave.defaultPrevented).toBe(true);
    act(() => { fireEvent.blur(nameInput); });
    expect(onChange).toHaveBeenCalledTimes(1);
    // The row re-renders under its new name once the store takes the change; here the parent did not.
    const defaults = within(row).getByLabelText("Default (JSON)");
    await user.type(defaults, "[[1");
    expect(hasPendingEdits()).toBe(true);
  });

  it("the example placeholder uses a name the graph defines", () => {
    expect(examplePlaceholder("template", ["input", "topic"])).toBe("e.g. Summarise {{ topic }}");
    expect(examplePlaceholder("template", ["input"])).toBe("e.g. Summarise {{ input.text }}");
  });
});
