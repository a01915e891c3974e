"""The durable core. Callers outside the engine use ``runs.engine.api`` (and ``runs.engine.types``).

- api: the public functions; types: value types and errors.
- scheduler: pure decisions (successors, joins, dispatch plan, run status, fork replay).
- claims (claim, heartbeat, budget), commit (the portable ORM commit), fastpath with
  fastpath_postgresql and fastpath_sqlite (the sequential commit as fixed SQL),
  operations (create, cancel, resume, fork, decisions), recovery_queries, writes
  (row writers they share), graphs (compiled graph cache).
- loop (claim -> execute -> commit), recovery (supervisor), workers (liveness),
  dispatch (the only django_q import), faults (crash points for tests).

Audit entries are written with the audit app's writer (``audit.chain``), in the same
transactions.

No DRF, no HTTP, no templates here. Interfaces call the public functions re-exported by
``runs.engine.api``.
"""
