"""The engine's storage: the only engine code that runs SQL or the ORM.

Layers of runs.engine (an import-linter layers contract in pyproject.toml keeps them; no
circle, and no function-level import of a project module except the lazy driver and
queue ones, each with a comment saying why)::

    api                 the operations code outside the engine calls
    cluster             the qcluster: forks, signals, warm-up
    recovery | loop     the supervisor; claim -> execute outside any transaction -> commit -> next
    store | dispatch    this package (every query and transaction); the queue's doorbells
                        (the only django_q import; its SQL is django-q2's broker's own)
    faults | workers    named crash points; this process's identity and its lease owners
    limits              size limits of values and state (pure)
    scheduler           which steps are ready, what they get, is the run finished (pure)
    types               values and errors

What is in here, by what it stores:

    claims              pending -> running under a lease (compare-and-set), heartbeats,
                        releases; one pick of the step due longest (a doorbell's claim;
                        runs.engine.loop.step_claim_due fires due deadlines between picks)
    commit              THE commit entry point: ``step_commit`` / ``step_fail`` assemble a
                        finished attempt's output, usage and cost, its transition (state,
                        successors, run status), its events and the audit entry where one
                        is due (a park) in one fenced transaction, taking a fast path
                        when one applies and the portable ORM path otherwise
    paths               the commit paths behind one interface (FastPath): the portable
                        path (commit, claims, operations: the ORM) and each database's
                        fast path (fastpath decides; fastpath_sqlite and
                        fastpath_postgresql write, the latter imported with psycopg on
                        first use, the engine's one lazy import of its own modules)
    writes              the small writes every path shares (run row, events, usage, cost)
    events              the run's event log: numbering, append, reads, push after commit
    state               the run state kept per key; the state after a committed step
    graphs              compiled graph versions (one read, then cached) and decisions on them
    operations          operator actions, each one transaction: create, cancel, resume,
                        fork, decide a waiting or parked step
    deadlines           a waiting step's deadline, fired once in one transaction
    recovery_queries    lapsed leases and dead owners back to due; what recovery rings for
    liveness            who is alive: worker and host heartbeats, as read by the pages
    clock               the database's clock
    reconnect           riding out a lost connection (same fenced write again)
    connections         closing, dropping and keeping this thread's connections, and
                        after-commit callbacks, for the layers above
    selectors           the few reads of run and step rows the layers above need

Why operations and deadlines live here and not above: each of their functions IS one
transaction under the run's row lock (its reads, writes, events and audit entry), so
they are storage; what the orchestration does around them (refusing a test run,
handing successors to the queue after commit, firing a deadline before a pick) stays in
api and loop. The store calls no queue: a function that makes steps runnable returns
their ids, and its caller rings the doorbells after commit.
"""
