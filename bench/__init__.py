"""Ballast benchmarks: what a durable node commit costs, against the database floor,
LangGraph and DBOS; recovery time, throughput and approvals at rest.

Run ``make bench`` (every case on PostgreSQL and SQLite, about 15 minutes) or one case:
``.venv/bin/python -m bench CASE [--db sqlite|postgres] [--n N] [--runs R]``.
Cases and the figures they print are described in docs/performance.md.

Modules: core (databases, floor, statistics, JSON lines), graphs (the benchmark
specs), cluster (qcluster and daphne subprocesses in their own process groups), cases
(Ballast cases), anatomy (SQL statements per commit, planning, profile), compare
(LangGraph, DBOS), report (results as Markdown), settings_tuned (the proposed
configuration, for ``--settings tuned`` what-if figures).
"""
