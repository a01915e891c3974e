"""Ballast benchmarks: what a durable node commit costs, against the database floor,
LangGraph and DBOS; recovery time, throughput and approvals at rest.

Run ``make bench`` (every case on PostgreSQL and SQLite, under 30 minutes), ``make
bench-headline`` (the interleaved comparison, under 5 minutes) or one case:
``.venv/bin/python -m bench CASE [--db sqlite|postgres] [--n N] [--runs R] [--rounds R]``;
``make bench-report`` regenerates the figure tables of docs/performance.md and README.md
from one results file.
Cases and the figures they print are described in docs/performance.md.

Modules: core (databases, floor, JSON lines), stats (medians, quartiles, rotated
rounds; pure), headline (floor, Ballast, LangGraph, DBOS interleaved in one process),
targets (issue 11's targets judged from result lines; pure), graphs (the benchmark
specs), cluster (qcluster and daphne subprocesses in their own process groups), cases
(Ballast cases), scaling (cost per node against run length and state size), anatomy (SQL
statements per commit, planning, profile), compare (LangGraph, DBOS), report (results as
Markdown; regenerates the documents' tables), settings_tuned (the proposed
configuration, for ``--settings tuned`` what-if figures).
"""
