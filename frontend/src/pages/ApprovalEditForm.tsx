// The "Approve with changed values" form of an approval request: rjsf + ajv, in its own chunk so the inbox opens without them.
import Form from "@rjsf/core";
import type { RJSFSchema } from "@rjsf/utils";
import { validator } from "../lib/formValidator";

/**
 * The request's ``edit_schema`` as a form (no submit button: the decision buttons send it);
 * ``onChange`` gets the whole edited object on each change.
 */
export default function ApprovalEditForm({ schema, values, onChange }: { schema: Record<string, unknown>; values: Record<string, unknown>; onChange(values: Record<string, unknown>): void }) {
  return (
    <Form schema={schema as RJSFSchema} formData={values} validator={validator}
      onChange={(e) => onChange((e.formData ?? {}) as Record<string, unknown>)} uiSchema={{ "ui:submitButtonOptions": { norender: true } }}
      showErrorList={false} noHtml5Validate>
      <></>
    </Form>
  );
}
