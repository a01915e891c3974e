// The builder's side panel: the selected node's panel, or the graph settings when nothing is selected.
import { useContext } from "react";
import { PageContextReact } from "../../lib/context";
import { useBuilder } from "../store";
import { GraphSettings } from "./GraphSettings";
import { NodePanel } from "./NodePanelLazy";
import "./panel.css";

/** No props: reads the graph, selection and validation through useBuilder(); the graph id from the page props. */
export function SidePanel() {
  const b = useBuilder();
  const page = useContext(PageContextReact);
  const rawId = page?.props.graphId;
  const graphId = typeof rawId === "number" ? rawId : null;
  const ids = b.selection.nodes;
  let body;
  if (ids.length === 1) {
    const node = b.spec.nodes.find((n) => n.id === ids[0]);
    body = node ? <NodePanel key={node.id} node={node} graphId={graphId} /> : <GraphSettings />;
  } else if (ids.length > 1) {
    body = (
      <div className="panel-header">
        <h2>{ids.length} nodes selected</h2>
        <p className="field-help">Select one node to edit its settings. Copy, paste, delete and move work on the whole selection.</p>
      </div>
    );
  } else {
    body = <GraphSettings />;
  }
  return (
    <aside className={`side-panel${b.readOnly ? " is-readonly" : ""}`} aria-label="Side panel">
      {/* Read-only is said once, by the page's header badge. */}
      {body}
    </aside>
  );
}

export default SidePanel;
