// The context a node card's "+" buttons call: open the node picker to add a node connected to that handle.
import { createContext } from "react";
import type { PickerOrigin } from "./picker";

/**
 * Opens the node picker for ``origin`` (the ``index``-th of a node's ``count`` outputs), beside
 * ``anchor`` (the "+" button's screen box). Null where nodes cannot be added (read-only
 * canvases, a run's page): the cards then draw no "+".
 */
export type AddAfter = (origin: PickerOrigin, index: number, count: number, anchor: DOMRect) => void;

export const AddAfterContext = createContext<AddAfter | null>(null);
