"""The expression and template language of graphs, bounded: one package for the language and its guard.

The guard's modules, in dependency order:

- ``errors``: :class:`~runs.sandbox.errors.ExpressionError` (what users see), ``Fault``
  (what a check raises) and the mapping of Python exceptions to error codes.
- ``limits``: :class:`~runs.sandbox.limits.Limits` and the settings that adjust them.
- ``guard``: per-evaluation accounting; every operation that can build more than its
  inputs is checked against the limits BEFORE it computes.
- ``whitelist``: the functions and methods expressions and templates may call.
- ``snapshot``: the private, JSON-only copy of the run state an evaluation reads.
- ``walker``: the expression tree walker (ours outright; no simpleeval code remains).
- ``jinja_env``: the bounded Jinja2 environment templates render in.
- ``process``: the long-lived, resource-limited evaluator process (the hard backstop),
  killed and respawned on overrun.

The language over them:

- ``values``: the JSON value check every value passes before it is stored.
- ``expressions``: the expression language of conditions and transforms (parse, check, evaluate).
- ``templating``: prompt and argument templates (parse, check, render in ``jinja_env``).
- ``schemas``: the one way a JSON Schema from a graph is checked and used.

TRAPS.md ("simpleeval blocks code execution, not resource exhaustion") is why each exists.
"""
