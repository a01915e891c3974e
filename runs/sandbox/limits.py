"""Evaluation limits for expressions and templates, and the settings that adjust them."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from runs.sandbox.errors import ExpressionError

__all__ = ["HARD_KILL_GRACE", "HUGE", "LIMITS", "MIB", "STARVED_WALL_FACTOR", "Limits", "effective_limits", "isolation", "setting"]

MIB = 1 << 20

# TRAPS.md: simpleeval-style evaluators stop code execution but not resource exhaustion,
# and a big-integer multiply or a padding method cannot be interrupted once it has
# started. So every operation that can produce more than its inputs is checked BEFORE it
# runs, against these values (runs.sandbox.guard); a cooperative deadline bounds the
# number of (individually bounded) steps; the evaluator process (runs.sandbox.process) is
# the hard backstop.


@dataclass(frozen=True)
class Limits:
    """Evaluation-time limits. Sizes count what an operation would BUILD, checked before it runs.

    - ``int_bits``: largest integer an operation may produce (4096 bits, about 1233 digits).
    - ``string_chars``: longest string an operation may produce.
    - ``items``: most items in a list/tuple/dict/set an operation may produce, nested
      items counted (``[[1]*1000]*1000`` is 1_001_000 items, even though it shares rows).
      Also the most items a function such as ``sorted`` or ``range`` may walk or create.
    - ``iterations``: comprehension steps (all comprehensions of one evaluation together).
    - ``budget``: characters and items all operations of one evaluation may build in
      total, garbage included (``[s + str(i) for i in range(10000)]`` builds 10_000
      strings even though each is small enough): bounds memory and time together.
    - ``memory_bytes``: bytes all operations of one evaluation may allocate, garbage
      included, estimated from what each would build (an integer by its bit length, a
      string by its length times its character width, a container by its slots; see
      :mod:`runs.sandbox.guard`). ``budget`` counts items, so 100_000 integers of 4096
      bits or strings of 4-byte characters passed it at 550 or 400_000 bytes each.
    - ``scan_steps``: most steps one operation that cannot be interrupted may take
      (comparing, searching, sorting, hashing): a character searched, 64 compared, an
      item compared. A step costs about 10 ns here (up to 100 ns on a loaded machine),
      so the default keeps one such call between 0.02 and 0.2 s, inside ``timeout``.
    - ``timeout``: seconds of CPU time for one evaluation (cooperative inline; the
      isolated process is killed once it has used ``HARD_KILL_GRACE`` seconds more).
      CPU time, not wall time: on a loaded machine a thread waits for a core, and
      ``i + 1`` that waited 0.6 s for one must not fail its step. A wall-time backstop of
      ``STARVED_WALL_FACTOR`` times the limit still ends an evaluation that gets no CPU.
    """

    int_bits: int = 4096
    string_chars: int = 100_000
    items: int = 100_000
    iterations: int = 10_000
    budget: int = 2_000_000
    memory_bytes: int = 32 * MIB
    scan_steps: int = 2_000_000
    timeout: float = 0.5


LIMITS = Limits()
HARD_KILL_GRACE = 0.25  # process mode: kill at timeout + this, if the cooperative stop did not come
# An evaluation ends after this many times its CPU-time limit in wall time, CPU used or not: at
# the default 0.5 s, 10 s, which a step waiting for a core on a machine at load 30 stays under.
STARVED_WALL_FACTOR = 20
HUGE = 1 << 62  # stands for "more than any limit" (a size that cannot even be computed)


def setting(name: str, default: Any) -> Any:
    """Django setting ``name``, or ``default`` when it is unset or Django is absent or not configured."""
    try:
        from django.conf import settings

        return getattr(settings, name, default)
    except Exception:  # Django absent or not configured: module defaults
        return default


def isolation() -> str:
    """``BALLAST_EXPRESSION_ISOLATION``: "process" (default) or "inline"; raises ExpressionError otherwise."""
    mode = setting("BALLAST_EXPRESSION_ISOLATION", "process")
    if mode not in ("process", "inline"):
        raise ExpressionError(f"BALLAST_EXPRESSION_ISOLATION must be 'process' or 'inline', not {mode!r}")
    return str(mode)


def effective_limits(base: Limits = LIMITS) -> Limits:
    """``base`` with ``timeout`` from ``BALLAST_EXPRESSION_TIMEOUT`` (seconds, 0 < t < 3600) and
    ``memory_bytes`` from ``BALLAST_EXPRESSION_MEMORY_BUDGET_MB`` (MiB, 1 to 4096) when set.

    Raises ExpressionError on a value outside those ranges.
    """
    timeout = float(setting("BALLAST_EXPRESSION_TIMEOUT", base.timeout))
    if not 0 < timeout < 3600:
        raise ExpressionError(f"BALLAST_EXPRESSION_TIMEOUT must be a number of seconds above 0, not {timeout!r}")
    budget_mb = setting("BALLAST_EXPRESSION_MEMORY_BUDGET_MB", None)
    memory = base.memory_bytes
    if budget_mb is not None:
        if not isinstance(budget_mb, int) or isinstance(budget_mb, bool) or not 1 <= budget_mb <= 4096:
            raise ExpressionError(f"BALLAST_EXPRESSION_MEMORY_BUDGET_MB must be a whole number of MiB from 1 to "
                                  f"4096, not {budget_mb!r}")
        memory = budget_mb * MIB
    if timeout == base.timeout and memory == base.memory_bytes:
        return base
    return Limits(**{**asdict(base), "timeout": timeout, "memory_bytes": memory})
