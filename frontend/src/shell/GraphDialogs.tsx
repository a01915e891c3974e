// Dialogs and controls for graph operations: new graph, duplicate, delete, import a JSON file.
import type { GraphSummary, ImportResult } from "../api/types";
import { useEffect, useRef, useState, type FormEvent } from "react";
import { ApiError } from "../lib/api";
import { createGraph, deleteGraph, duplicateGraph, ImportFailed, importGraphFile, type ImportProblem } from "./graphActions";
import { graphUrl } from "./graphLinks";
import { loadExamples, type GraphExample } from "./examples";
import { ErrorMessage, Modal } from "./ui";
import { Button } from "./Button";

/**
 * Ask for a name and what to start from (Start -> End, or one of the examples), create the
 * graph and open it in the builder (``onCreated`` replaces the navigation in tests).
 */
export function NewGraphDialog({ onClose, onCreated = (g) => window.location.assign(graphUrl(g.id)) }: {
  onClose: () => void;
  onCreated?: (g: GraphSummary) => void;
}) {
  const [name, setName] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [examples, setExamples] = useState<GraphExample[] | null>(null);
  const [from, setFrom] = useState("");
  useEffect(() => {
    let live = true;
    loadExamples().then((list) => { if (live) setExamples(list); }).catch(() => { if (live) setExamples([]); });
    return () => { live = false; };
  }, []);
  const example = examples?.find((x) => x.id === from);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onCreated(await createGraph(name.trim(), "", example?.spec));
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  const nameError = error instanceof ApiError ? error.fields.name?.join(" ") : undefined;
  return (
    <Modal title="New graph" onClose={onClose}>
      <form onSubmit={submit} className="form">
        <div className={`field${nameError ? " field-invalid" : ""}`}>
          <label htmlFor="new-graph-name">Name</label>
          <input id="new-graph-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={200}
            placeholder="e.g. support-triage" aria-invalid={nameError ? true : undefined} autoFocus />
          {nameError ? <div className="field-error" role="alert">{nameError}</div> : null}
        </div>
        <fieldset className="field start-from">
          <legend>Start from</legend>
          <label className="start-from__choice">
            <input type="radio" name="start-from" value="" checked={from === ""} onChange={() => setFrom("")} />
            <span><strong>Start and End</strong> <span className="muted">an empty flow: add nodes with the “+” on Start</span></span>
          </label>
          {(examples ?? []).map((x) => (
            <label key={x.id} className="start-from__choice">
              <input type="radio" name="start-from" value={x.id} checked={from === x.id}
                onChange={() => { setFrom(x.id); if (!name.trim()) setName(x.id.replace(/_/g, "-")); }} />
              <span><strong>{x.name}</strong> <span className="muted">example, {x.nodes} nodes: {x.description}</span></span>
            </label>
          ))}
        </fieldset>
        {error && !nameError ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || name.trim() === ""}>{busy ? "Creating…" : "Create and open"}</Button>
        </div>
      </form>
    </Modal>
  );
}

/** Ask for the copy's name (default "<name> copy") and duplicate the graph. */
export function DuplicateDialog({ graph, onClose, onDone }: { graph: GraphSummary; onClose: () => void; onDone: (copy: GraphSummary) => void }) {
  const [name, setName] = useState(`${graph.name} copy`);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onDone(await duplicateGraph(graph.id, name.trim()));
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <Modal title={`Duplicate “${graph.name}”`} onClose={onClose}>
      <form onSubmit={submit} className="form">
        <div className="field">
          <label htmlFor="dup-graph-name">Name of the copy</label>
          <input id="dup-graph-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} autoFocus />
        </div>
        {error ? <ErrorMessage error={error} /> : null}
        <div className="modal-footer">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" disabled={busy || name.trim() === ""}>{busy ? "Duplicating…" : "Duplicate"}</Button>
        </div>
      </form>
    </Modal>
  );
}

/**
 * Confirm, then delete. A graph with runs (the list says so: ``deletable``, ``run_count``)
 * is explained up front, without a delete button; a refusal that still comes (a run started
 * since the list loaded: 409) is shown with the server's reason.
 */
export function DeleteDialog({ graph, onClose, onDone }: { graph: GraphSummary; onClose: () => void; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  if (graph.deletable === false) {
    const runs = graph.run_count ?? 0;
    return (
      <Modal title={`“${graph.name}” cannot be deleted`} onClose={onClose} footer={
        <Button onClick={onClose} autoFocus>Close</Button>
      }>
        <p>
          It has {runs} run{runs === 1 ? "" : "s"}, and runs keep the graph version they ran, so a graph with runs is kept.
          To stop using it, stop starting runs on it; to start afresh, duplicate it.
        </p>
      </Modal>
    );
  }
  const confirm = async () => {
    setBusy(true);
    setError(null);
    try {
      await deleteGraph(graph.id);
      onDone();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <Modal title={`Delete “${graph.name}”?`} onClose={onClose} footer={
      <>
        <Button onClick={onClose} ref={(b) => { if (error) b?.focus(); }}>{error ? "Close" : "Cancel"}</Button>
        {error ? null : <Button variant="danger" onClick={confirm} disabled={busy}>{busy ? "Deleting…" : "Delete graph"}</Button>}
      </>
    }>
      {error ? <ErrorMessage error={error} title="Not deleted." /> : (
        <p>{deletedWhat(graph.latest_version ?? 0)} This cannot be undone.</p>
      )}
    </Modal>
  );
}

/** What deleting a graph with ``versions`` published versions removes, as a sentence. */
export function deletedWhat(versions: number): string {
  if (versions === 0) return "The graph and its draft are deleted (it was never published).";
  return `The graph, its draft and ${versions === 1 ? "its published version" : `all ${versions} published versions`} are deleted.`;
}

/** The problems of a refused import, listed by path. */
export function ImportProblems({ title, problems, onDismiss }: { title: string; problems: ImportProblem[]; onDismiss: () => void }) {
  return (
    <div className="alert alert-error" role="alert" aria-label="Import errors">
      <div className="alert-head">
        <strong>{title}</strong>
        <Button variant="ghost" size="small" icon onClick={onDismiss} aria-label="Dismiss import errors">✕</Button>
      </div>
      {problems.length > 0 ? (
        <ul className="field-errors">
          {problems.map((p, i) => (
            <li key={i}>{p.path ? <code>{p.path}</code> : <code>(file)</code>}{p.node ? <span className="muted"> (node {p.node})</span> : null}: {p.message}</li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** Why an import was refused: problems by path (ImportFailed) or another error. */
export type ImportFailure = { title: string; problems: ImportProblem[] } | { error: unknown };

/**
 * "Import JSON" button over a hidden file input: reads the chosen file and imports it,
 * then calls ``onImported`` or ``onFailure`` (the page shows it; ``null`` clears it).
 */
export function ImportButton({ onImported, onFailure }: {
  onImported: (r: ImportResult) => void;
  onFailure: (f: ImportFailure | null) => void;
}) {
  const input = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const onFile = async (file: File | undefined) => {
    if (!file) return;
    setBusy(true);
    onFailure(null);
    try {
      onImported(await importGraphFile(file));
    } catch (err) {
      onFailure(err instanceof ImportFailed ? { title: err.message, problems: err.problems } : { error: err });
    } finally {
      setBusy(false);
      if (input.current) input.current.value = "";
    }
  };
  return (
    <>
      <Button onClick={() => input.current?.click()} disabled={busy}>
        {busy ? "Importing…" : "Import JSON"}
      </Button>
      <input ref={input} type="file" accept="application/json,.json" className="visually-hidden" tabIndex={-1}
        aria-label="Graph JSON file to import" data-testid="import-file" onChange={(e) => void onFile(e.target.files?.[0])} />
    </>
  );
}

/**
 * A page header's graph actions, in the one order every page uses: Import JSON, then New graph
 * (the primary action) on the right, as in the dialogs (Cancel, then the action).
 */
export function GraphCreateActions({ onNew, onImported, onFailure }: {
  onNew: () => void;
  onImported: (r: ImportResult) => void;
  onFailure: (f: ImportFailure | null) => void;
}) {
  return (
    <>
      <ImportButton onImported={onImported} onFailure={onFailure} />
      <Button variant="primary" onClick={onNew}>New graph</Button>
    </>
  );
}

/** The feedback of a failed import (or nothing). */
export function ImportFeedback({ failure, onDismiss }: { failure: ImportFailure | null; onDismiss: () => void }) {
  if (failure === null) return null;
  if ("error" in failure) return <ErrorMessage error={failure.error} title="Import failed." />;
  return <ImportProblems title={failure.title} problems={failure.problems} onDismiss={onDismiss} />;
}
