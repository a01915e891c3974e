// What a node's code fields get from the panel around them: the test data to preview values against and the variables to pick from.
import { createContext } from "react";

/** One name the variable picker offers (``panel/variables.ts`` builds the list). */
export interface AssistVariable {
  path: string;
  group: string;
  detail: string;
}

/** The node panel's help for expression and template fields; null outside a node panel (no picker, no preview). */
export interface CodeAssist {
  graphId: number;
  /** The state values are previewed against: the node's pinned data, else its last input; undefined: none yet. */
  state: Record<string, unknown> | undefined;
  /** Where ``state`` comes from, for the preview's label ("pinned data", "last test input"). */
  stateLabel: string;
  variables: readonly AssistVariable[];
}

export const CodeAssistContext = createContext<CodeAssist | null>(null);
