// Test setup: jsdom lacks ResizeObserver and DOMMatrix, which React Flow needs to mount.
import { cleanup, configure } from "@testing-library/react";
import { afterEach } from "vitest";
import { preloadNodePanel } from "../builder/panel/NodePanelLazy";

// Files share one environment (isolate: false in vite.config.ts): Testing Library's own
// auto-cleanup is registered once per module graph, so unmount after every test here.
afterEach(() => {
  cleanup();
  localStorage.clear();
  sessionStorage.clear();
});

// findBy*/waitFor give up after this long (Testing Library's default is 1 s): on a loaded machine
// a picker's options took longer than that to appear. A wait still ends as soon as it is met.
configure({ asyncUtilTimeout: 15_000 });

class ResizeObserverStub {
  observe(): void {}
  unobserve(): void {}
  disconnect(): void {}
}
globalThis.ResizeObserver ??= ResizeObserverStub as unknown as typeof ResizeObserver;

class DOMMatrixReadOnlyStub {
  m22: number;
  constructor(transform?: string) {
    const scale = transform?.match(/scale\(([1-9.])\)/)?.[1];
    this.m22 = scale !== undefined ? Number(scale) : 1;
  }
}
(globalThis as unknown as { DOMMatrixReadOnly: unknown }).DOMMatrixReadOnly ??= DOMMatrixReadOnlyStub;

// The node panel is a lazily loaded chunk in the app; load it up front so panel tests render
// a selected node's form in the first pass, as the app does once the chunk is there.
await preloadNodePanel();
