"""The durable core. Callers outside the engine use ``runs.engine.api`` (and ``runs.engine.types``).

Layers, top to bottom (pyproject.toml's import-linter contracts keep them):

- api: the operations code outside the engine calls (35 names).
- cluster (the qcluster: forks, signals), recovery (the supervisor), loop (claim ->
  execute outside any transaction -> commit -> next; the doorbell's claim).
- store: the only engine code that runs SQL or the ORM (claims, the one commit entry
  point, the portable path and each database's fast path behind one interface,
  operations, deadlines, events, state, recovery queries, liveness, the database
  clock); dispatch: the queue's doorbells (the only django_q import).
- faults (crash points for tests), workers (this process's identity, lease owners).
- limits (size limits), scheduler (pure decisions: successors, joins, dispatch plan,
  run status, fork replay), types (value types and errors).

Audit entries are written with the audit app's writer (``audit.chain``), in the same
transactions. No DRF, no HTTP, no templates here.
"""
