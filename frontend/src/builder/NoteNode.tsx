// A sticky note on the canvas (spec.notes, layout only): edit its text, move, resize, delete.
import { NodeResizer, type NodeProps } from "@xyflow/react";
import { memo, useEffect, useState } from "react";
import { NOTE_PREFIX, type NoteFlowNode } from "./flow";
import { useBuilder } from "./store";

function NoteNodeImpl({ id, data, selected }: NodeProps<NoteFlowNode>) {
  const { change } = useBuilder();
  const noteId = id.slice(NOTE_PREFIX.length);
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(data.note.text);
  useEffect(() => setText(data.note.text), [data.note.text]);
  const commit = (value: string) => {
    if (value === data.note.text) return;
    change((spec) => ({ ...spec, notes: (spec.notes ?? []).map((n) => (n.id === noteId ? { ...n, text: value } : n)) }), `note-text:${noteId}`);
  };
  return (
    <div className="bnote" style={{ background: data.note.color ?? undefined }} data-testid={`note-${noteId}`}
      onDoubleClick={() => !data.readOnly && setEditing(true)}>
      {!data.readOnly && (
        <NodeResizer isVisible={selected} minWidth={120} minHeight={60}
          onResizeEnd={(_, p) => change((spec) => ({
            ...spec,
            notes: (spec.notes ?? []).map((n) => n.id === noteId
              ? { ...n, position: { x: Math.round(p.x), y: Math.round(p.y) }, width: Math.round(p.width), height: Math.round(p.height) }
              : n),
          }))} />
      )}
      {editing ? (
        <textarea className="bnote__text nodrag nowheel" autoFocus value={text} aria-label="Note text"
          onChange={(e) => { setText(e.target.value); commit(e.target.value); }}
          onBlur={() => setEditing(false)}
          onKeyDown={(e) => { e.stopPropagation(); if (e.key === "Escape") setEditing(false); }} />
      ) : (
        <div className="bnote__text">{data.note.text || <em className="muted">Double-click to write</em>}</div>
      )}
    </div>
  );
}

export const NoteNode = memo(NoteNodeImpl);
