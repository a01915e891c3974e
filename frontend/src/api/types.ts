// The API's answers by name: aliases of the types openapi-typescript generates from drf-spectacular's
// schema (schema.d.ts, `make api-types`). No answer's shape is written by hand: change a serializer,
// regenerate, and the compiler shows every page that reads it.
import type { GraphSpec } from "../builder/spec";
import type { components } from "./schema";

type Schemas = components["schemas"];

// Statuses and kinds: unions of the server's choices.
export type RunStatus = Schemas["RunStatusEnum"];
export type StepStatus = Schemas["StepStatusEnum"];
export type AttemptStatus = Schemas["AttemptStatusEnum"];
export type ApprovalStatus = Schemas["ApprovalStatusEnum"];
export type RunEventKind = Schemas["RunEventKindEnum"];
export type WaitingFor = Schemas["WaitingForEnum"];

// Pages of a list: numbered (``?page=``) and keyset (``?cursor=``).
export type Page<T> = Omit<Schemas["PaginatedGraphList"], "results"> & { results: T[] };
export type CursorPage<T> = Omit<Schemas["CursorRunPage"], "results"> & { results: T[] };

// The error body every 4xx carries, plus the keys some add (``current`` on a draft's 409...).
export type ApiErrorBody = Schemas["ErrorBody"] & { [extra: string]: unknown };

// Graphs, drafts, versions, validation. A graph's spec and draft are the graph document
// (graphs/spec.py, a pydantic model the schema shows as a free JSON object): GraphSpec.
export type GraphSummary = Schemas["GraphListOutput"];
export type GraphDetail = Omit<Schemas["GraphDetailOutput"], "draft" | "spec"> & { draft: GraphSpec; spec: GraphSpec };
export type StoredDraft = Omit<Schemas["DraftOutput"], "spec"> & { spec: GraphSpec };
export type VersionInfo = Schemas["VersionListOutput"];
export type VersionDetail = Omit<Schemas["VersionDetailOutput"], "spec"> & { spec: GraphSpec };
export type VersionDiff = Schemas["VersionDiffOutput"];
export type FieldChange = Schemas["FieldChangeOutput"];
export type DiffEdge = Schemas["DiffEdgeOutput"];
export type NodeKindInfo = Schemas["NodeKindOutput"];
export type NodeKinds = Schemas["NodeKindsOutput"];
export type ValidationResult = Schemas["ValidationOutput"];
export type ValidationIssue = Schemas["IssueOutput"];
export type PreRunEstimate = Schemas["EstimateOutput"];
export type PublishWarning = Schemas["PublishWarningOutput"];
export type PublishCheck = Schemas["PublishCheckOutput"];
export type Published = Schemas["PublishOutput"];
export type ImportResult = Schemas["ImportOutput"];
export type NodeTestResult = Schemas["NodeTestOutput"];
export type ExpressionCheck = Schemas["ExpressionCheckOutput"];
export type SourceProblem = Schemas["SourceErrorOutput"];
export type PinsAnswer = Schemas["PinsOutput"];
export type ValuePreview = Schemas["PreviewOutput"];
export type ToolInfo = Schemas["ToolOutput"];
export type ToolList = Schemas["ToolsOutput"];
export type ModelList = Schemas["ModelsOutput"];
export type ProviderModels = Schemas["ProviderModelsOutput"];
export type RunAlert = Schemas["RunAlertOutput"];
export type Principal = Schemas["PrincipalOutput"];
export type Principals = Schemas["PrincipalsOutput"];
export type Webhook = Schemas["WebhookOutput"];
export type WebhookCreated = Schemas["WebhookCreatedOutput"];
export type Delivery = Schemas["DeliveryOutput"];
export type ListenState = Schemas["ListenOutput"];
export type Schedule = Schemas["ScheduleOutput"];
export type ScheduleRunNow = Schemas["RunNowOutput"];
export type RotatedSecret = Schemas["SecretOutput"];
export type ScheduleTick = Schemas["TickOutput"];
export type Callback = Schemas["CallbackOutput"];
export type CallbackCreated = Schemas["CallbackCreatedOutput"];
export type CallbackDelivery = Schemas["CallbackDeliveryOutput"];

// Runs, steps, events, run actions.
export type RunSummary = Schemas["RunOutput"];
export type RunDetail = Schemas["RunDetailOutput"];
/** GET /runs/{id}/graph/: the graph a run ran (its version, or the draft snapshot of a test). */
export type RunGraph = Omit<Schemas["RunGraphOutput"], "spec"> & { spec: GraphSpec };
export type RunStep = Schemas["RunStepOutput"];
export type StepSummary = Schemas["StepOutput"];
export type AttemptSpan = Schemas["AttemptSpanOutput"];
export type ForkOrigin = Schemas["RunForkOriginOutput"];
export type StepDetail = Schemas["StepDetailOutput"];
export type Usage = Schemas["UsageOutput"];
export type EngineError = Schemas["EngineErrorOutput"];
export type Attempt = Schemas["AttemptOutput"];
export type ChildStep = Schemas["ChildStepOutput"];
export type StepStateAnswer = Schemas["StepStateOutput"];
export type RunEvent = Schemas["EventOutput"];
export type RunsSummary = Schemas["RunSummaryOutput"];
export type BulkCancelResult = Schemas["BulkCancelResultOutput"];
export type BulkCancel = Schemas["BulkCancelOutput"];
export type RunActionsAllowed = Schemas["RunActionsOutput"];
export type ActionPreview = Schemas["ActionPreviewOutput"];
export type Estimate = Schemas["StepEstimateOutput"];
export type PreviewStep = Schemas["PreviewStepOutput"];
export type KeptStep = Schemas["KeptStepOutput"];
export type RunComparison = Schemas["RunComparisonOutput"];
export type CompareRunSummary = Schemas["CompareRunOutput"];
export type CompareSide = Schemas["CompareSideOutput"];
export type StateChange = Schemas["StateKeyChangeOutput"];

// Approvals.
export type Approval = Schemas["ApprovalOutput"];
export type RunApproval = Schemas["RunApprovalOutput"];
export type NextAction = Schemas["NextActionOutput"];
export type InboxCounts = Schemas["InboxCountsOutput"];
export type ClaimMany = Schemas["ClaimManyOutput"];

// Reports and administration.
export type CostRow = Schemas["CostRowOutput"];
export type CostTotals = Schemas["CostTotalsOutput"];
export type BudgetRow = Schemas["CostBudgetOutput"];
export type AuditEntry = Schemas["AuditEntryOutput"];
export type AuditVersion = Schemas["AuditVersionOutput"];
export type AuditReport = Schemas["AuditVerifyOutput"];
export type AuditFacets = Schemas["AuditFacetsOutput"];
export type WorkersBody = Schemas["WorkersOutput"];
export type WorkerRow = Schemas["WorkerOutput"];
export type InFlightStep = Schemas["InFlightStepOutput"];
export type UserRow = Schemas["UserOutput"];
export type UserCreated = Schemas["UserCreatedOutput"];
export type Invite = Schemas["InviteOutput"];
export type GroupRow = Schemas["GroupOutput"];
export type ApiTokenRow = Schemas["TokenOutput"];
export type CreatedToken = Schemas["TokenCreatedOutput"];
export type ProviderRow = Schemas["ProviderOutput"];
export type ConnectionResult = Schemas["ProviderTestOutput"];
export type McpServerRow = Schemas["McpServerOutput"];
export type McpTool = Schemas["McpToolOutput"];
export type McpTestResult = Schemas["McpTestOutput"];
