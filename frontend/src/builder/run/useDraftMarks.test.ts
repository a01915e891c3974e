// The draft run's node states on the builder's canvas: kept while the draft is the one that ran and its drawer is open.
import { act, renderHook } from "@testing-library/react";
import { runDetail, runStep } from "../../test/factories";
import type { GraphSpec } from "../spec";
import { useDraftMarks } from "./useDraftMarks";

const spec = (prompt = "Hi {{ input.name }}"): GraphSpec => ({
  name: "g",
  nodes: [
    { id: "start", kind: "start", config: {}, position: { x: 0, y: 0 } },
    { id: "ask", kind: "llm", config: { prompt }, position: { x: 200, y: 0 } },
    { id: "end", kind: "end", config: {}, position: { x: 400, y: 0 } },
  ],
  edges: [{ source: "start", target: "ask" }, { source: "ask", target: "end" }],
} as GraphSpec);

const failedRun = runDetail({
  id: 7, status: "failed", is_test: true,
  steps: [
    runStep({ id: 1, run: 7, node_id: "start", status: "succeeded" }),
    runStep({ id: 2, run: 7, node_id: "ask", status: "failed" }),
  ],
});

describe("useDraftMarks", () => {
  it("colours each node by the draft run's result, as a run's page does", () => {
    const first = spec();
    const { result } = renderHook(({ s, id }) => useDraftMarks(s, id), { initialProps: { s: first, id: 7 as number | null } });
    expect(result.current.marks).toBeUndefined();
    act(() => result.current.onRun(failedRun));
    expect(result.current.marks).toEqual({ start: { state: "succeeded" }, ask: { state: "failed" }, end: { state: "skipped" } });
  });

  it("drops the colours once the draft changes or the results are closed; moving a card keeps them", () => {
    const first = spec();
    const { result, rerender } = renderHook(({ s, id }) => useDraftMarks(s, id), { initialProps: { s: first, id: 7 as number | null } });
    act(() => result.current.onRun(failedRun));
    const moved = { ...first, nodes: first.nodes.map((n) => (n.id === "ask" ? { ...n, position: { x: 240, y: 40 } } : n)) };
    rerender({ s: moved, id: 7 });
    expect(result.current.marks?.ask).toEqual({ state: "failed" });
    rerender({ s: spec("Hello {{ input.name }}"), id: 7 });
    expect(result.current.marks).toBeUndefined();
    // A later read of the same run does not make the edited draft the one that ran.
    act(() => result.current.onRun(failedRun));
    expect(result.current.marks).toBeUndefined();
    rerender({ s: first, id: 7 });
    expect(result.current.marks?.ask).toEqual({ state: "failed" });
    rerender({ s: first, id: null });
    expect(result.current.marks).toBeUndefined();
  });
});
