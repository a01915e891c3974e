"""The hash-chained audit log: who (a user, an API token, a worker) did what to which object.

Every app writes it, so it stands below them all and imports none of them
(import-linter keeps it so): ``audit.models`` (entries and chain heads), ``audit.chain``
(the writer, the verifier, and retention's cuts: whole run chains to tombstones, long-lived
chains at checkpoints), ``audit.checkpoints`` (a cut chain's checkpoints and their checks),
``audit.integrity`` (the HMAC key and canonical content), ``audit.principals`` (as whom
an API request audits). An
app that needs more than a chain head's row lock while appending (runs: a run's chain locks
the run row first) registers that lock with :func:`audit.chain.register_scope_lock` from
its ``AppConfig.ready``.
"""
