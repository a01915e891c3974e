"""The durable core: scheduler (pure), store (the only ORM code), loop, recovery, dispatch.

No DRF, no HTTP, no templates here. Interfaces call the public functions re-exported by
``runs.engine.api``.
"""
