// A node's test data: its pinned state, else the input of its last test or draft-run step (read from the step's state API).
import type { StepStateAnswer } from "../../api/types";
import { useApi } from "../../shell/useApi";
import { useNodeData } from "../run/lastData";
import { usePin } from "../run/pins";

export interface TestData {
  /** The state (undefined: the node has neither pinned data nor a known last input). */
  state: Record<string, unknown> | undefined;
  /** "pinned data", "last test input", "last run input" or "no test data". */
  label: string;
  pinned: boolean;
}

function asObject(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** The state Test node starts from and value previews resolve against, with where it comes from. */
export function useTestData(graphId: number | null, nodeId: string): TestData {
  const pin = usePin(graphId, nodeId);
  const last = useNodeData(graphId, nodeId);
  const needsStep = pin === undefined && last !== undefined && last.input === undefined && last.stepId !== null;
  const { data: step } = useApi<StepStateAnswer>(needsStep ? `steps/${last.stepId}/state/` : null);
  if (pin !== undefined) return { state: pin, label: "pinned data", pinned: true };
  const input = asObject(last?.input !== undefined ? last.input : step?.input_state);
  if (input && last) return { state: input, label: last.source === "test" ? "last test input" : "last run input", pinned: false };
  return { state: undefined, label: "no test data", pinned: false };
}
