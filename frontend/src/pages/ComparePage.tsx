// /runs/compare/?a=1&b=2: two runs of one graph side by side: per node status, output, cost and duration;
// their states key by key, the differences first.
import type { CompareSide, RunComparison } from "../api/types";
import { useState } from "react";
import { compareParams, compareUrl, nodeDifference, secondsText } from "../runs/actions";
import "../runs/runs.css";
import { formatDateTime, formatUsd, versionText } from "../shell/format";
import { graphUrl, runUrl } from "../shell/graphLinks";
import { EmptyState, ErrorMessage, PageHeader, Skeleton, StatusBadge } from "../shell/ui";
import { useApi } from "../shell/useApi";
import { Button, ButtonLink } from "../shell/Button";

function Json({ value, label }: { value: unknown; label: string }) {
  if (value === undefined || value === null) return <span className="muted">—</span>;
  return <pre className="json" aria-label={label} tabIndex={0}>{JSON.stringify(value, null, 2)}</pre>;
}

function diffClass(word: string): string {
  if (word === "same") return "cmp-diff cmp-diff-same";
  if (word.startsWith("only")) return "cmp-diff cmp-diff-only";
  return "cmp-diff cmp-diff-changed";
}

function Side({ side, which }: { side: CompareSide | null; which: "a" | "b" }) {
  const cls = `cmp-${which}`;
  if (!side) return <><td className={cls}><span className="muted">did not run</span></td><td className="num" /><td className="num" /></>;
  return (
    <>
      <td className={cls}><StatusBadge status={side.status} />{side.steps > 1 ? <span className="muted small"> ×{side.steps}</span> : null}{side.attempts > side.steps ? <span className="muted small"> ({side.attempts} attempts)</span> : null}</td>
      <td className="num">{side.cost_usd === null ? <span className="muted" title="no priced attempt">—</span> : formatUsd(side.cost_usd)}</td>
      <td className="num">{secondsText(side.seconds)}</td>
    </>
  );
}

/** Pick two run ids when the URL does not name both. */
function ChooseRuns({ a, b }: { a: number | null; b: number | null }) {
  const [left, setLeft] = useState(a ? String(a) : "");
  const [right, setRight] = useState(b ? String(b) : "");
  const ok = /^\d+$/.test(left) && /^\d+$/.test(right) && left !== right;
  return (
    <form className="card toolbar" onSubmit={(e) => { e.preventDefault(); if (ok) window.location.assign(compareUrl(Number(left), Number(right))); }}>
      <label className="inline-field"><span>Run A</span><input value={left} onChange={(e) => setLeft(e.target.value)} inputMode="numeric" aria-label="Run A" /></label>
      <label className="inline-field"><span>Run B</span><input value={right} onChange={(e) => setRight(e.target.value)} inputMode="numeric" aria-label="Run B" /></label>
      <Button type="submit" variant="primary" disabled={!ok}>Compare</Button>
      <span className="field-help">Two runs of the same graph. Or select two runs in the run list and choose Compare.</span>
    </form>
  );
}

export default function ComparePage() {
  const { a, b } = compareParams(window.location.search);
  const ready = a !== null && b !== null && a !== b;
  const { data, error, loading, reload } = useApi<RunComparison>(ready ? `runs/compare/?a=${a}&b=${b}` : null);
  const [allKeys, setAllKeys] = useState(false);
  const header = (
    <>
      <nav className="breadcrumbs" aria-label="Breadcrumbs"><a href="/runs/">Runs</a> <span aria-hidden="true">/</span> Compare</nav>
      <PageHeader
        title={ready ? <>Compare <span className="cmp-label-a">A #{a}</span> and <span className="cmp-label-b">B #{b}</span></> : "Compare two runs"}
        subtitle={data ? <>Graph <a href={graphUrl(data.graph)}>{data.graph_name}</a></> : undefined}
        actions={ready ? <>
          <ButtonLink href={compareUrl(b, a)}>Swap A and B</ButtonLink>
          <Button onClick={reload} disabled={loading}>Refresh</Button>
        </> : undefined}
      />
    </>
  );
  if (!ready) return <main className="page">{header}<ChooseRuns a={a} b={b} /></main>;
  if (error) return <main className="page">{header}<ErrorMessage error={error} title="These runs cannot be compared." /><ChooseRuns a={a} b={b} /></main>;
  if (!data) return <main className="page">{header}<Skeleton lines={6} label="Comparing the runs…" /></main>;
  const changed = data.state.filter((s) => s.change !== "same");
  const keys = allKeys ? data.state : changed;
  const differentNodes = data.nodes.filter((n) => nodeDifference(n) !== "same").length;
  return (
    <main className="page">
      {header}
      <div className="cmp-runs">
        {(["a", "b"] as const).map((side) => {
          const r = data.runs[side];
          return (
            <section key={side} className="card" aria-label={`Run ${side.toUpperCase()}`}>
              <h2><span className={`cmp-label-${side}`}>{side.toUpperCase()}</span> <a href={runUrl(r.id)}>Run #{r.id}</a> <StatusBadge status={r.status} /></h2>
              <dl>
                <dt>Version</dt><dd>{versionText(r)}</dd>
                <dt>Started</dt><dd>{formatDateTime(r.created_at)}{r.created_by ? ` by ${r.created_by}` : ""}</dd>
                <dt>Duration</dt><dd>{secondsText(r.seconds)}</dd>
                <dt>Cost</dt><dd>{formatUsd(r.cost_usd)}</dd>
                {r.forked_from ? <><dt>Forked from</dt><dd><a href={runUrl(r.forked_from)}>#{r.forked_from}</a></dd></> : null}
              </dl>
            </section>
          );
        })}
      </div>
      <section className="card" aria-labelledby="cmp-nodes">
        <div className="card-head"><h2 id="cmp-nodes">Nodes</h2><span className="muted small">{differentNodes === 0 ? "Every node did the same." : `${differentNodes} of ${data.nodes.length} differ`}</span></div>
        <div className="table-wrap">
          <table className="table cmp-table" aria-label="Nodes compared">
            <thead>
              <tr>
                <th scope="col">Node</th><th scope="col">Difference</th>
                <th scope="col" className="cmp-a">A status</th><th scope="col" className="num">A cost</th><th scope="col" className="num">A time</th>
                <th scope="col" className="cmp-b">B status</th><th scope="col" className="num">B cost</th><th scope="col" className="num">B time</th>
              </tr>
            </thead>
            <tbody>
              {data.nodes.map((n) => {
                const word = nodeDifference(n);
                return (
                  <tr key={n.node_id} data-node={n.node_id} className={word === "same" ? undefined : "cmp-row-changed"}>
                    <td>
                      <code>{n.node_id}</code> <span className="muted small">{n.kind}</span>
                      {n.a || n.b ? (
                        <details>
                          <summary>Outputs</summary>
                          <div className="cmp-out">
                            <div><span className="cmp-label-a">A</span><Json value={n.a?.error ?? n.a?.updates ?? n.a?.output} label={`A ${n.node_id} output`} /></div>
                            <div><span className="cmp-label-b">B</span><Json value={n.b?.error ?? n.b?.updates ?? n.b?.output} label={`B ${n.node_id} output`} /></div>
                          </div>
                        </details>
                      ) : null}
                    </td>
                    <td><span className={diffClass(word)}>{word}</span></td>
                    <Side side={n.a} which="a" />
                    <Side side={n.b} which="b" />
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      </section>
      <section className="card" aria-labelledby="cmp-state">
        <div className="card-head">
          <h2 id="cmp-state">State</h2>
          <label className="inline-field small"><input type="checkbox" checked={allKeys} onChange={(e) => setAllKeys(e.target.checked)} /> <span>Show unchanged keys ({data.state.length - changed.length})</span></label>
        </div>
        {keys.length === 0 ? <EmptyState title="The states are the same">Every key has the same value in both runs.</EmptyState> : (
          <div className="table-wrap">
            <table className="table cmp-table" aria-label="State compared">
              <thead><tr><th scope="col">Key</th><th scope="col">Difference</th><th scope="col" className="cmp-a">A</th><th scope="col" className="cmp-b">B</th></tr></thead>
              <tbody>
                {keys.map((k) => {
                  const word = k.change === "only_a" ? "only in A" : k.change === "only_b" ? "only in B" : k.change;
                  return (
                    <tr key={k.key} data-key={k.key}>
                      <td><code>{k.key}</code></td>
                      <td><span className={diffClass(word)}>{word}</span></td>
                      <td className="cmp-a">{k.change === "only_b" ? <span className="muted">absent</span> : <Json value={k.a} label={`A ${k.key}`} />}</td>
                      <td className="cmp-b">{k.change === "only_a" ? <span className="muted">absent</span> : <Json value={k.b} label={`B ${k.key}`} />}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </main>
  );
}
