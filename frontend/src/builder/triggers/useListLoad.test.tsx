// useListLoad: loading, then the list; a refusal as its message; reload asks again and shows the fresh answer.
import { act, renderHook, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { scriptFetch } from "../panel/testing";
import { useListLoad } from "./useListLoad";

afterEach(() => vi.unstubAllGlobals());

describe("useListLoad", () => {
  it("loads, fails with the server's message, and reloads", async () => {
    let answer: [number, unknown] = [200, [{ id: 1 }]];
    const calls = scriptFetch(() => answer);
    const { result } = renderHook(() => useListLoad<{ id: number }>("graphs/4/schedules/"));
    expect(result.current.load).toEqual({ kind: "loading" });
    await waitFor(() => expect(result.current.load).toEqual({ kind: "ready", items: [{ id: 1 }] }));
    answer = [403, { error: { code: "forbidden", message: "Only builders manage schedules.", fields: {} } }];
    await act(() => result.current.reload());
    expect(result.current.load).toEqual({ kind: "failed", message: "Only builders manage schedules." });
    answer = [200, [{ id: 1 }, { id: 2 }]];
    await act(() => result.current.reload());
    expect(result.current.load).toEqual({ kind: "ready", items: [{ id: 1 }, { id: 2 }] });
    expect(calls.map((c) => c.url)).toEqual(Array(3).fill("/api/v1/graphs/4/schedules/"));
  });
});
