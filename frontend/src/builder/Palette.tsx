// The palette: node kinds from the catalogue, grouped by category, with search; drag one onto the canvas.
import type { NodeKindInfo } from "../api/types";
import { useMemo, useState, type DragEvent } from "react";
import { categoryColour } from "./NodeCard";
import { DockHide } from "./useDocked";

export const DRAG_MIME = "application/x-ballast-kind";

/** Kinds matching ``query`` (kind, title, description, category), grouped by category in catalogue order. */
export function groupKinds(catalogue: readonly NodeKindInfo[], query: string): [string, NodeKindInfo[]][] {
  const q = query.trim().toLowerCase();
  const groups = new Map<string, NodeKindInfo[]>();
  for (const k of catalogue) {
    const hay = `${k.kind} ${k.title} ${k.description} ${k.category}`.toLowerCase();
    if (q && !hay.includes(q)) continue;
    const cat = k.category || "other";
    groups.set(cat, [...(groups.get(cat) ?? []), k]);
  }
  return [...groups.entries()];
}

export function Palette({ catalogue, onAdd, onHide }: { catalogue: readonly NodeKindInfo[]; onAdd: (kind: string) => void; onHide?: () => void }) {
  const [query, setQuery] = useState("");
  const groups = useMemo(() => groupKinds(catalogue, query), [catalogue, query]);
  const onDragStart = (e: DragEvent, kind: string) => {
    e.dataTransfer.setData(DRAG_MIME, kind);
    e.dataTransfer.setData("text/plain", kind);
    e.dataTransfer.effectAllowed = "move";
  };
  return (
    <aside className="palette" aria-label="Node kinds">
      <div className="palette__head">
        <span className="palette__heading">Node kinds</span>
        {onHide && <DockHide side="left" label="Node kinds" onHide={onHide} />}
      </div>
      <input className="palette__search" type="search" placeholder="Search nodes…" value={query}
        aria-label="Search node kinds" onChange={(e) => setQuery(e.target.value)} />
      {groups.length === 0 && <p className="muted palette__empty">No node kind matches “{query}”.</p>}
      {groups.map(([category, kinds]) => (
        <section key={category} className="palette__group">
          <h3 className="palette__category">{category}</h3>
          {kinds.map((k) => (
            <div key={k.kind} className="palette__item" draggable role="button" tabIndex={0}
              data-kind={k.kind} title={`${k.description}\n\nDrag onto the canvas, or press Enter to add.`}
              style={{ ["--kind" as string]: categoryColour(k.category) }}
              onDragStart={(e) => onDragStart(e, k.kind)}
              onKeyDown={(e) => { if (e.key === "Enter") onAdd(k.kind); }}
              onDoubleClick={() => onAdd(k.kind)}>
              <span className="palette__title">{k.title}</span>
              <span className="palette__desc">{k.description}</span>
            </div>
          ))}
        </section>
      ))}
    </aside>
  );
}
