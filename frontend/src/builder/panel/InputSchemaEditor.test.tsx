// The input-schema editor computes every edit from the builder's current schema, not from the (deferred) copy it renders.
import { fireEvent, render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { InputSchemaEditor, type SchemaEdit } from "./InputSchemaEditor";

describe("InputSchemaEditor", () => {
  it("keeps a rename when Required is ticked before the panel renders it", () => {
    const shown = { type: "object", properties: { ticket: { type: "string" } }, required: [] as string[] };
    let current: Record<string, unknown> = shown;
    const apply = (edit: SchemaEdit) => { current = edit(current); };
    // The panel keeps rendering ``shown``: a deferred copy one edit behind.
    render(<InputSchemaEditor schema={shown} onChange={apply} />);
    const name = screen.getByLabelText("Field name");
    fireEvent.focus(name);
    fireEvent.change(name, { target: { value: "order" } });
    fireEvent.blur(name); // the rename commits as the click on Required begins
    fireEvent.click(screen.getByLabelText("Required"));
    expect(current).toEqual({ type: "object", properties: { order: { type: "string" } }, required: ["order"] });
  });
});
