// Placeholder for the side panel (node config, graph settings, versions, test, run), built in this folder separately.
import { useBuilder } from "../store";

/** The side panel: until the real one lands, it names the selection. */
export function SidePanel() {
  const { spec, selection } = useBuilder();
  const node = spec.nodes.find((n) => n.id === selection.nodes[0]);
  return (
    <aside className="side-panel" aria-label="Side panel">
      {node ? <h2>{node.label || node.id} <small className="muted">{node.kind}</small></h2> : <h2>{spec.name}</h2>}
    </aside>
  );
}

export default SidePanel;
