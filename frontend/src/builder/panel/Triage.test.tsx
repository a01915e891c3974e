// Every node of the support-triage example opens in the side panel without changing the graph.
import { screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
// The example the README and the browser tests build: every node kind it uses must open.
import triage from "../../../../examples/support_triage.json";
import type { GraphSpec } from "../spec";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, scriptFetch } from "./testing";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

describe("the support-triage example's nodes", () => {
  for (const n of (triage as unknown as GraphSpec).nodes) {
    it(`opens ${n.id} (${n.kind})`, () => {
      scriptFetch(() => [200, { ok: true, errors: [] }]);
      const { harness } = renderInBuilder(<SidePanel />, { spec: triage as unknown as GraphSpec, selection: { nodes: [n.id] } });
      expect(screen.getByRole("heading", { name: n.label || n.id })).toBeTruthy();
      expect(harness.changeKeys).toEqual([]);
    });
  }
});
