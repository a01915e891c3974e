// What a Run of the builder's draft actually runs: the published version, said plainly when the draft differs.

/** The draft as the builder last validated it (null: not checked yet). */
export interface DraftState {
  /** Validation errors in the draft. */
  problems: number;
  /** The hash a publish of the draft would store (null when invalid or unknown). */
  contentHash: string | null;
}

/**
 * The sentence the run dialog shows about which version runs, and whether it is a warning.
 * ``versionHash`` is the version's stored content hash (undefined when unknown); ``draft``
 * is null on a read-only version's page (there the version is what the user looks at).
 */
export function runVersionNote(version: number, versionHash: string | undefined, draft: DraftState | null): { text: string; warn: boolean } {
  if (draft === null) return { text: `Runs version ${version}.`, warn: false };
  if (draft.problems > 0) {
    const n = `${draft.problems} problem${draft.problems > 1 ? "s" : ""}`;
    return { text: `Runs version ${version}, not your draft: the draft has ${n} and unpublished changes. Fix them and publish to run them.`, warn: true };
  }
  if (draft.contentHash && versionHash && draft.contentHash !== versionHash) {
    return { text: `Runs version ${version}, not your draft: the draft has unpublished changes. Publish to run them.`, warn: true };
  }
  if (draft.contentHash && versionHash) return { text: `Runs version ${version} (the same as your draft).`, warn: false };
  return { text: `Runs version ${version}.`, warn: false };
}

/** Why Run is disabled (null: it is not): no version exists yet. */
export function runBlocked(version: number | null | undefined): string | null {
  return version ? null : "Nothing to run yet: runs use a published version, and this graph has none. Publish the draft first.";
}

/**
 * The one note above a draft's canvas, or null. Only a graph that was never published gets
 * one: Run has nothing to run, and the note says the way there, once. Problems are not
 * repeated (the Problems list under the canvas names them, Publish's title counts them), and
 * a published graph needs no note (the buttons' titles say why one is disabled), as in n8n
 * and Dify, whose canvases carry no banners for these states.
 */
export function draftNotice({ latestVersion, onDraft, canBuild, canOperate, problems }: {
  /** The newest published version's number (null: none). */
  latestVersion: number | null;
  /** False on a read-only published version's page. */
  onDraft: boolean;
  canBuild: boolean;
  canOperate: boolean;
  /** Validation errors in the draft (0 while unknown). */
  problems: number;
}): string | null {
  if (!onDraft || latestVersion) return null;
  if (canBuild) {
    return problems > 0
      ? "Never published: fix the problems below, then run the draft to try it or publish it."
      : "Never published: run the draft to try it here; publish it to make a version that triggers and others can run.";
  }
  return canOperate ? "Nothing to run yet: this graph has no published version (a builder publishes it)." : null;
}

/**
 * Why Publish is disabled (null: it is not). ``draft`` is null until the draft is validated;
 * ``latest`` is the newest published version's number and stored content hash (undefined
 * while unknown). A draft equal to the latest version would publish nothing new: the server
 * answers such a publish with that same version (builder.services.graph_publish), so the
 * button says so instead of pretending to make version N+1.
 */
export function publishBlocked(draft: DraftState | null, latest: { number: number; hash: string | undefined } | null): string | null {
  if (draft === null) return "Checking the graph…";
  if (draft.problems > 0) return `Fix ${draft.problems} problem${draft.problems > 1 ? "s" : ""} before publishing`;
  if (latest && latest.hash && draft.contentHash === latest.hash) return `No changes since version ${latest.number}`;
  return null;
}
