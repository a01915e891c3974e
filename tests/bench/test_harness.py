"""The benchmark harness's own logic, without benchmarking: the rotation of the headline's
rounds, medians and quartiles, the headline's lines, target verdicts and the report's
regeneration of the documents. Pure Python over result lines: no database is touched."""
from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import pytest

from bench import report, stats, targets
from bench.headline import FLOOR_OPS, Contestant, summarize

# --------------------------------------------------------------------------- statistics


def test_quartiles_interpolate_inclusively():
    # 1..10: q1 = 3.25, median 5.5, q3 = 7.75 (NumPy's default linear rule).
    d = stats.describe([float(v) for v in [7, 1, 10, 4, 2, 9, 3, 8, 6, 5]])
    assert (d["q1"], d["median"], d["q3"]) == (3.25, 5.5, 7.75)
    assert d["iqr"] == 4.5
    assert d["p95"] == 10 and d["min"] == 1 and d["max"] == 10 and d["count"] == 10


def test_quartiles_of_odd_count_and_single_sample():
    assert stats.quartiles([5.0, 1.0, 3.0]) == (2.0, 3.0, 4.0)
    assert stats.quartiles([2.5]) == (2.5, 2.5, 2.5)
    with pytest.raises(ValueError, match="no samples"):
        stats.describe([])


def test_an_outlier_moves_the_median_and_iqr_little():
    calm = [1.0] * 5 + [1.1] * 5
    spiky = calm[:-1] + [50.0]
    assert stats.describe(spiky)["median"] == stats.describe(calm)["median"]
    assert stats.describe(spiky)["iqr"] == pytest.approx(stats.describe(calm)["iqr"])


def test_percentile_is_nearest_rank():
    assert stats.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == 5.0
    assert stats.percentile(list(map(float, range(1, 101))), 95) == 95.0


# --------------------------------------------------------------------------- rotation


def test_rotation_puts_every_contestant_in_every_position_equally():
    names = ["floor", "ballast", "langgraph", "dbos"]
    orders = [stats.rotated(names, i) for i in range(12)]
    assert orders[0] == names and orders[1] == ["ballast", "langgraph", "dbos", "floor"]
    for position in range(len(names)):
        counts = Counter(order[position] for order in orders)
        assert set(counts.values()) == {3}, counts
    assert all(sorted(order) == sorted(names) for order in orders)


def test_interleave_runs_each_contestant_once_per_round_in_rotated_order():
    calls: list[str] = []

    def make(name, value):
        def sample():
            calls.append(name)
            return value
        return sample

    samples, orders = stats.interleave({"a": make("a", 1.0), "b": make("b", 2.0), "c": make("c", 3.0)}, 10)
    assert samples == {"a": [1.0] * 10, "b": [2.0] * 10, "c": [3.0] * 10}
    assert calls[:6] == ["a", "b", "c", "b", "c", "a"]
    assert [o for order in orders for o in order] == calls


def test_interleave_refuses_fewer_than_ten_rounds():
    with pytest.raises(ValueError, match="at least 10"):
        stats.interleave({"a": lambda: 1.0}, 9)


def test_paired_ratios_are_round_by_round():
    assert stats.paired_ratios([2.0, 4.0], [1.0, 2.0]) == [2.0, 2.0]
    with pytest.raises(ValueError, match="differ in length"):
        stats.paired_ratios([1.0], [1.0, 2.0])


# --------------------------------------------------------------------------- headline lines


def _contestants():
    noop = lambda: 0.0  # noqa: E731 - summarize never calls them
    return [
        Contestant("floor", "commit", FLOOR_OPS, "ms/commit", 1, noop),
        Contestant("ballast", "linear", 100, "ms/node", 1, noop),
        Contestant("langgraph", "linear", 100, "ms/node", 1, noop),
        Contestant("ballast", "fanout", 10, "ms/run", 13, noop),
        Contestant("langgraph", "fanout", 10, "ms/run", 12, noop),
    ]


def _samples():
    # The machine doubles its speed halfway: per-round ratios stay put, medians do not.
    floor = [0.4] * 5 + [0.2] * 5
    return {
        f"floor.commit.{FLOOR_OPS}": floor,
        "ballast.linear.100": [f * 3 for f in floor],
        "langgraph.linear.100": [f * 5 for f in floor],
        "ballast.fanout.10": [f * 13 * 2 for f in floor],
        "langgraph.fanout.10": [f * 13 for f in floor],
    }


def test_summarize_reports_median_iqr_and_per_round_floor_ratio():
    samples = _samples()
    orders = [stats.rotated(list(samples), i) for i in range(10)]
    lines = summarize("inprocess", "postgres", _contestants(), samples, orders, [1.0, 2.0])
    by_case = {(d["case"], d["n"]): d for d in lines}
    chain = by_case[("headline.inprocess.ballast.linear", 100)]
    assert chain["ratio_to_floor"] == 3.0 and chain["ratio_to_floor_q1"] == 3.0
    assert chain["median"] == pytest.approx(statistics.median(samples["ballast.linear.100"]))
    assert chain["q1"] < chain["median"] < chain["q3"] and chain["iqr"] == pytest.approx(chain["q3"] - chain["q1"], abs=1e-4)
    assert chain["rounds"] == 10 and chain["mean_position"] == pytest.approx(2.0)
    fan = by_case[("headline.inprocess.ballast.fanout", 10)]
    assert fan["ratio_to_floor"] == 2.0  # 26 x floor over 13 commits
    pair = by_case[(targets.pair_case("inprocess", "langgraph", "linear"), 100)]
    assert pair["median"] == 0.6 and pair["faster"] == "ballast"
    assert by_case[(targets.pair_case("inprocess", "langgraph", "fanout"), 10)]["faster"] == "langgraph"
    assert not any("dbos" in d["case"] for d in lines)


# --------------------------------------------------------------------------- targets


def _line(case, db, n, median, **extra):
    return {"case": case, "database": db, "n": n, "median": median, "unit": extra.pop("unit", "ms"), **extra}


def _results() -> list[dict]:
    pg = "postgres"
    return [
        {"case": "machine", "nproc": 2, "cpu": "test cpu", "mem_total_gib": 1.0, "postgres": "15", "python": "3.11", "at": "T"},
        _line("headline.inprocess.floor.commit", pg, 100, 0.4, ratio_to_floor=1.0, q1=0.39, q3=0.41, load1=2.0),
        _line("headline.inprocess.ballast.linear", pg, 100, 0.72, ratio_to_floor=1.8, floor_ms=0.4, q1=0.7, q3=0.75),
        _line("headline.inprocess.langgraph.linear", pg, 100, 2.0, ratio_to_floor=5.0, floor_ms=0.4),
        _line("headline.inprocess.ballast.fanout", pg, 10, 20.0),
        _line("headline.inprocess.langgraph.fanout", pg, 10, 16.0),
        _line(targets.pair_case("inprocess", "langgraph", "fanout"), pg, 10, 1.3, q1=1.2, q3=1.4),
        _line("headline.worker.ballast.linear", pg, 100, 1.2, ratio_to_floor=3.0, floor_ms=0.4),
        _line("statesize.1kb", pg, 60, 1.0, wal_bytes_per_node=2000.0),
        _line("statesize.1mb", pg, 60, 1.2, wal_bytes_per_node=4000.0),
        _line("scaling.loop", pg, 10, 1.0),
        _line("scaling.loop", pg, 100, 1.05),
        _line("scaling.loop", pg, 1000, 1.2),
        _line("recovery.restart", pg, 1, 5.0),  # without runs in flight: not what the target reads
        _line("recovery.restart_busy", pg, 30, 0.4, q1=0.3, q3=0.5, others=30),
        {"case": "recovery.takeover.same_host_busy", "database": pg, "failed": "timed out"},
        _line("throughput.workers1", pg, 200, 100.0, runs_per_s=14.0),
        _line("throughput.workers2", pg, 200, 150.0, runs_per_s=21.0),
        {"case": "target.chain.inprocess", "database": pg, "median": 99.0},  # a verdict line is never a figure
    ]


def _verdicts():
    return {(v.target, v.database): v for v in targets.judge(_results())}


def test_targets_met_not_met_and_missing():
    v = _verdicts()
    assert v["chain.inprocess", "postgres"].met is True and v["chain.inprocess", "postgres"].value == 1.8
    assert v["chain.qcluster", "postgres"].met is False  # 3.0x > 2.5x
    assert v["fanout10.inprocess", "postgres"].met is False
    assert v["fanout10.inprocess", "postgres"].value == 1.3  # the per-round ratio, not 20/16
    assert v["state.1mb", "postgres"].met is True and "WAL 2,000 vs 4,000 bytes per node" in v["state.1mb", "postgres"].measured
    assert v["flat.loop", "postgres"].met is False and v["flat.loop", "postgres"].value == pytest.approx(1.2)
    assert v["recovery.restart", "postgres"].met is True and "30 other runs in flight" in v["recovery.restart", "postgres"].measured
    # A failed case and a case that did not run are "no figure", never met.
    assert v["recovery.takeover", "postgres"].met is None
    assert v["fanout100.qcluster", "postgres"].met is None and "no figure" in v["fanout100.qcluster", "postgres"].measured
    assert v["flat.loop", "sqlite"].met is None and ("chain.inprocess", "sqlite") not in v  # PostgreSQL-only target
    # Reported without a limit.
    assert v["throughput", "postgres"].met is None and "14.0 runs/s with 1 worker process, 21.0 with 2" in v["throughput", "postgres"].measured
    assert v["chain.vs_langgraph", "postgres"].value == pytest.approx(0.36) and v["chain.vs_langgraph", "postgres"].met is None


def test_targets_at_the_limit_are_met():
    lines = [_line("headline.inprocess.ballast.linear", "postgres", 100, 0.8, ratio_to_floor=2.0, floor_ms=0.4)]
    assert {v.target: v for v in targets.judge(lines)}["chain.inprocess"].met is True


def test_for_cases_picks_the_targets_a_case_reads():
    chosen = targets.for_cases({"scaling.loop", "scaling.chain"}, ["postgres"], _results())
    assert [v.target for v in chosen] == ["flat.loop", "flat.chain"]
    assert chosen[1].met is None  # the chain did not run
    assert chosen[0].words().endswith(": NOT MET") and chosen[1].words().endswith("no figure (case not run, skipped or failed)")
    throughput = targets.for_cases({"throughput.workers1"}, ["sqlite"], _results())[0]
    assert throughput.words().endswith("no figure (case not run, skipped or failed)")
    assert targets.for_cases({"throughput.workers1"}, ["postgres"], _results())[0].words().endswith("(reported, no limit)")


# --------------------------------------------------------------------------- report


DOC = """# Performance

Prose that stays.

<!-- bench:provenance -->
old provenance
<!-- /bench:provenance -->

## Results

<!-- bench:headline -->
| old | table |
<!-- /bench:headline -->

More prose: why the time goes where it goes.

<!-- bench:targets -->
<!-- /bench:targets -->

<!-- bench:figures -->
old figures
<!-- /bench:figures -->
"""

README = """# Ballast

## Performance

<!-- bench:readme -->
old
<!-- /bench:readme -->

The end.
"""


@pytest.fixture
def results_file(tmp_path) -> Path:
    path = tmp_path / "20990101T000000Z.jsonl"
    steps = [{"case": "headline", "database": "postgres", "seconds": 120.0}, {"case": "scaling", "database": "postgres", "seconds": 5.0}]
    lines = _results() + [{"case": "elapsed", "seconds": 125.0, "plan": ["headline"], "databases": ["postgres"], "steps": steps}]
    path.write_text("\n".join(json.dumps(d) for d in lines) + "\n\n")
    return path


def test_write_docs_regenerates_only_the_marked_sections(results_file, tmp_path):
    doc, readme = tmp_path / "performance.md", tmp_path / "README.md"
    doc.write_text(DOC)
    readme.write_text(README)
    changed = report.write_docs(results_file, docs=doc, readme_path=readme)
    assert changed == [doc, readme]
    text = doc.read_text()
    assert "old provenance" not in text and "old figures" not in text and "| old | table |" not in text
    assert "Prose that stays." in text and "More prose: why the time goes where it goes." in text
    assert "took 2 min 05 s (headline); slowest: headline on postgres 120 s, scaling on postgres 5 s" in text
    assert "took 2 min 05 s" in text and "test cpu" in text and "load average (1 min) 2.0 to 2.0" in text
    assert "| linear 100 | Ballast | 0.720 | 0.700-0.750 | ms | 1.8 |" in text
    assert "| 100-node chain in-process at most 2x the floor | postgres |" in text
    assert "with 1 worker process, 21.0 with 2 (1.50x) | reported |" in text
    assert "| fan-out of 100 through workers at most 3x LangGraph | postgres | no figure (case not run, skipped or failed) | - |" in text
    assert "| recovery.takeover.same_host_busy | postgres | | | | | | | | FAILED: timed out |" in text
    assert "| statesize.1mb | postgres | 60 |" in text
    r = readme.read_text()
    assert "| Ballast, 100-node chain in-process, ms per node | 0.72 | 0.70-0.75 | 1.8 |" in r
    assert "The end." in r and "\nold\n" not in r
    assert "targets: 3 of 6 met in this run (chain.qcluster (postgres), fanout10.inprocess (postgres), flat.loop (postgres) not met)" in r
    # Regenerating from the same file changes nothing.
    assert report.write_docs(results_file, docs=doc, readme_path=readme) == []


def test_write_docs_names_a_missing_marker(results_file, tmp_path):
    doc, readme = tmp_path / "performance.md", tmp_path / "README.md"
    doc.write_text(DOC.replace("<!-- /bench:targets -->", ""))
    readme.write_text(README)
    with pytest.raises(report.MissingMarker, match=r"performance\.md: no '<!-- bench:targets -->'"):
        report.write_docs(results_file, docs=doc, readme_path=readme)
    assert doc.read_text() == DOC.replace("<!-- /bench:targets -->", "")  # nothing half-written


def test_load_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"case": "machine"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not a JSON line"):
        report.load(path)


def test_the_repository_documents_carry_every_marker():
    for doc, names in ((report.DOCS, report.DOC_SECTIONS), (report.README, report.README_SECTIONS)):
        text = doc.read_text()
        for name in names:
            assert f"<!-- bench:{name} -->" in text and f"<!-- /bench:{name} -->" in text, (doc, name)


def test_latest_skips_single_case_files(tmp_path):
    (tmp_path / "20990101T000000Z.jsonl").write_text('{"case": "machine", "nproc": 2}\n')
    (tmp_path / "20990102T000000Z.jsonl").write_text('{"case": "scaling.loop", "database": "sqlite"}\n')
    assert report.latest(tmp_path).name == "20990101T000000Z.jsonl"
    with pytest.raises(SystemExit, match="no results of make bench"):
        report.latest(tmp_path / "empty")


def test_plan_drops_unknown_and_repeated_steps():
    from bench.__main__ import PLAN, plan_steps

    steps = [("headline", ("postgres",), []), ("nosuch", ("sqlite",), []), ("headline", ("sqlite",), []),
             ("linear", ("postgres",), ["--settings", "tuned"]), ("linear", ("postgres",), [])]
    known = {"headline": "", "linear": ""}
    assert plan_steps(steps, known) == [steps[0], steps[3], steps[4]]
    assert len({(c, tuple(e)) for c, _, e in PLAN}) == len(PLAN)


BUILDER_LINES = [
    {"case": "builder.open", "database": "sqlite", "n": 300, "runs": 5, "median": 900.0, "p95": 950.0, "unit": "ms",
     "load1": 3.0, "at": "2099-01-01T00:00:00+00:00"},
    {"case": "builder.interactive", "database": "sqlite", "n": 300, "runs": 5, "median": 980.0, "p95": 1100.0, "unit": "ms",
     "first_drag_median_ms": 80.0, "cpu_median_ms": 400.0, "cpu_p95_ms": 450.0, "load1": 3.0},
    {"case": "builder.drag_frame", "database": "sqlite", "n": 200, "runs": 5, "median": 3.0, "p95": 20.0, "unit": "ms",
     "cpu_median_ms": 2.0, "cpu_p95_ms": 15.0, "load1": 3.0},
    {"case": "builder.scripts", "database": "sqlite", "n": 10, "runs": 1, "median": 502932.0, "p95": 502932.0, "unit": "bytes",
     "gzip_bytes": 502932, "gzip_bytes_before_drawn": 163317, "entry_gzip_bytes": 68853, "load1": 3.0},
]


def test_write_docs_from_a_builder_run_writes_only_the_builder_tables(tmp_path):
    """``python -m bench builder``'s file regenerates the builder sections and leaves the engine's as they are."""
    path = tmp_path / "20990101T000000Z.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in BUILDER_LINES) + "\n")
    marker = "<!-- bench:builder -->\nold builder\n<!-- /bench:builder -->\n"
    doc, readme = tmp_path / "performance.md", tmp_path / "README.md"
    doc.write_text(DOC + marker)
    readme.write_text(README + marker)
    assert report.write_docs(path, docs=doc, readme_path=readme) == [doc, readme]
    text = doc.read_text()
    assert "old provenance" in text and "| old | table |" in text and "old figures" in text  # the engine's: untouched
    assert "old builder" not in text
    assert "| interactive (drawn + first drag moved a node), wall | 980 ms | 1,100 ms | < 1 s: met |" in text
    assert "| the same span, renderer main-thread CPU | 400 ms | 450 ms | < 1 s: met |" in text
    assert "| main-thread work per drag frame, wall | 3.00 ms | 20.0 ms | p95 < 16 ms: not met |" in text
    assert "| the same frames, CPU time | 2.00 ms | 15.0 ms | p95 < 16 ms: met |" in text
    assert "| of which requested before every node is drawn (the first page's scripts) | 159 KB | | entry 67 KB |" in text
    r = readme.read_text()
    assert "\nold\n" in r and "old builder" not in r and "load average 3.0 to 3.0" in r


def test_write_docs_without_builder_figures_keeps_the_builder_tables(results_file, tmp_path):
    marker = "<!-- bench:builder -->\nold builder\n<!-- /bench:builder -->\n"
    doc, readme = tmp_path / "performance.md", tmp_path / "README.md"
    doc.write_text(DOC + marker)
    readme.write_text(README + marker)
    report.write_docs(results_file, docs=doc, readme_path=readme)
    assert "old builder" in doc.read_text() and "old builder" in readme.read_text()
    assert "old figures" not in doc.read_text()
