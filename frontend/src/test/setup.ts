// Test setup: jsdom lacks ResizeObserver and DOMMatrix, which React Flow needs to mount.
import { preloadNodePanel } from "../builder/panel/NodePanelLazy";

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
