// Test data pinned per node, kept by the server beside the draft (GET graph ``pins``; PUT/DELETE draft/pins/<node>/).
import type { PinsAnswer } from "../../api/types";
import { useSyncExternalStore } from "react";
import { api } from "../../lib/api";

type Pins = Record<string, Record<string, unknown>>;

const listeners = new Set<() => void>();
let current: { graphId: number | null; pins: Pins } = { graphId: null, pins: {} };

function commit(graphId: number, pins: Pins): void {
  current = { graphId, pins };
  listeners.forEach((l) => l());
}

/** The pins the graph was loaded with (GET /graphs/{id}/ ``pins``): the builder page calls this once per load. */
export function seedPins(graphId: number, pins: Record<string, unknown> | undefined): void {
  commit(graphId, (pins ?? {}) as Pins);
}

/** Pin ``data`` (a JSON object) as node ``nodeId``'s test data on the server. Throws ApiError (400 field errors, 404). */
export async function pinNode(graphId: number, nodeId: string, data: Record<string, unknown>): Promise<void> {
  const answer = await api<PinsAnswer>(`graphs/${graphId}/draft/pins/${encodeURIComponent(nodeId)}/`, { method: "PUT", body: { data } });
  commit(graphId, answer.pins as Pins);
}

/** Unpin node ``nodeId``'s test data. Throws ApiError. */
export async function unpinNode(graphId: number, nodeId: string): Promise<void> {
  const answer = await api<PinsAnswer>(`graphs/${graphId}/draft/pins/${encodeURIComponent(nodeId)}/`, { method: "DELETE" });
  commit(graphId, answer.pins as Pins);
}

/** Node ``nodeId``'s pinned data (undefined: none, or another graph's pins are loaded). */
export function usePin(graphId: number | null, nodeId: string): Record<string, unknown> | undefined {
  return useSyncExternalStore(
    (listener) => { listeners.add(listener); return () => { listeners.delete(listener); }; },
    () => (graphId !== null && current.graphId === graphId ? current.pins[nodeId] : undefined),
  );
}

/** Every node id with pinned data, for the canvas's pin markers (a stable object between changes). */
export function usePinnedIds(graphId: number | null): Pins {
  return useSyncExternalStore(
    (listener) => { listeners.add(listener); return () => { listeners.delete(listener); }; },
    () => (graphId !== null && current.graphId === graphId ? current.pins : EMPTY),
  );
}

const EMPTY: Pins = {};

/** Whether node ``nodeId`` of the loaded graph has pinned data (the canvas card's pin marker). */
export function usePinned(nodeId: string): boolean {
  return useSyncExternalStore(
    (listener) => { listeners.add(listener); return () => { listeners.delete(listener); }; },
    () => current.pins[nodeId] !== undefined,
  );
}
