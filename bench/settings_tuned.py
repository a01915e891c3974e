"""What-if settings for ``python -m bench CASE --settings tuned``: Ballast's settings plus the
configuration changes docs/performance.md proposes, so their gain is measured, not guessed.
Nothing in the application uses this module.

- Persistent database connections (PostgreSQL): ``CONN_MAX_AGE=None`` with health checks.
  With ``CONN_MAX_AGE=0`` every django-q2 broker call (the pusher polls every 0.05 s), every
  task and every result save opens a new PostgreSQL connection (a backend fork, ~5 ms).
- django-q2 keeps no success rows (``save_limit=-1``): Ballast's own tables are the truth;
  with ``save_limit=200`` the monitor locks and loads up to 200 task rows after every task.
- Server-side binding with prepared statements (PostgreSQL): ``server_side_binding`` and
  ``prepare_threshold=5`` (TRAPS.md: "less again" than fixed SQL with client binding).
"""
from ballast.settings import *  # noqa: F403
from ballast.settings import DATABASES, Q_CLUSTER

_db = DATABASES["default"]
if _db["ENGINE"].endswith("postgresql"):
    _db["CONN_MAX_AGE"] = None
    _db["CONN_HEALTH_CHECKS"] = True
    _db["OPTIONS"] = {**_db.get("OPTIONS", {}), "server_side_binding": True, "prepare_threshold": 5}

Q_CLUSTER = {**Q_CLUSTER, "save_limit": -1}
