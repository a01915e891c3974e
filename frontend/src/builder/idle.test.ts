import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { afterQuiet } from "./idle";

describe("afterQuiet", () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  it("runs the work once, after the quiet time", () => {
    const work = vi.fn();
    afterQuiet(work, 500);
    vi.advanceTimersByTime(499);
    expect(work).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(work).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(5000);
    expect(work).toHaveBeenCalledTimes(1);
  });

  it("waits for the browser's idle callback when there is one", () => {
    const callbacks: (() => void)[] = [];
    const w = window as unknown as { requestIdleCallback?: unknown; cancelIdleCallback?: unknown };
    w.requestIdleCallback = (cb: () => void) => { callbacks.push(cb); return callbacks.length; };
    w.cancelIdleCallback = () => undefined;
    try {
      const work = vi.fn();
      afterQuiet(work, 100);
      vi.advanceTimersByTime(100);
      expect(work).not.toHaveBeenCalled();
      callbacks[0]?.();
      expect(work).toHaveBeenCalledTimes(1);
    } finally {
      delete w.requestIdleCallback;
      delete w.cancelIdleCallback;
    }
  });

  it("does nothing once cancelled", () => {
    const work = vi.fn();
    const cancel = afterQuiet(work, 100);
    cancel();
    vi.advanceTimersByTime(1000);
    expect(work).not.toHaveBeenCalled();
  });
});
