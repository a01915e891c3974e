// The node panel's code-split boundary: NodePanel (JSON Schema forms, ajv) is its own chunk, loaded when a node is first selected or hovered.
import { Suspense, lazy, type ComponentProps } from "react";
import type { NodePanel as NodePanelComponent } from "./NodePanel";

type Props = ComponentProps<typeof NodePanelComponent>;
type Loaded = { default: typeof NodePanelComponent };

let loaded: Loaded | null = null;
let loading: Promise<Loaded> | null = null;

/**
 * Download and evaluate the node panel's chunk (once); resolves when it can render. The
 * canvas calls it when the pointer rests on a node, so the form is usually there by the click.
 */
export function preloadNodePanel(): Promise<Loaded> {
  loading ??= import("./NodePanel").then((m) => (loaded = { default: m.NodePanel }));
  return loading;
}

// Once the chunk is loaded, hand React.lazy a thenable that resolves synchronously: React then
// renders the form in the same pass instead of showing the fallback for one frame.
const Lazy = lazy(() => (loaded ? ({ then: (resolve: (m: Loaded) => void) => resolve(loaded as Loaded) } as Promise<Loaded>) : preloadNodePanel()));

/** NodePanel behind a Suspense boundary (same props); "Loading…" only while its chunk downloads. */
export function NodePanel(props: Props) {
  return (
    <Suspense fallback={<p className="muted" aria-busy="true">Loading the node's settings…</p>}>
      <Lazy {...props} />
    </Suspense>
  );
}
