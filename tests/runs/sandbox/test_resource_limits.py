"""Limits that hold for every operation: bytes allocated, uninterruptible operations, case mapping, a deployment's
hard RLIMIT_CPU, and bounded quotations of user values in messages."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from runs.sandbox.errors import MAX_MESSAGE_CHARS, ExpressionError, Fault
from runs.sandbox.expressions import check_constant_parts, evaluate, evaluate_inline
from runs.sandbox.guard import Guard
from runs.sandbox.limits import LIMITS, MIB, Limits
from runs.sandbox.process import pool, run_isolated
from runs.sandbox.templating import TEMPLATE_LIMITS, render_template
from tests.support.bounded import assert_fails_fast

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["inline", "process"])
def mode(request, settings):
    settings.BALLAST_EXPRESSION_ISOLATION = request.param
    # An idle evaluator process first: the bound under test is how soon an operation is
    # refused, not how long a fresh interpreter takes to start on a busy machine.
    assert run_isolated("expr", "[x for x in a]", {"a": [0]}, LIMITS) == [0]
    return request.param


def fails(source: str, state: dict, code: str = "limit", within: float = 0.5) -> ExpressionError:
    return assert_fails_fast(evaluate, ExpressionError, source, state, code, within)


def template_fails(source: str, state: dict, code: str = "limit", within: float = 0.5) -> ExpressionError:
    return assert_fails_fast(render_template, ExpressionError, source, state, code, within)


# ---------------------------------------------------------------------------------------
# Memory in bytes

# Each is within every item and character limit, and each made 55 to 65 MB of integers
# (a range makes its items as it goes): the evaluator process grew by 155 MiB for the first.
BIG_INTEGERS = [
    "list(range(2**4094, 2**4094 + 99999))",
    "sorted(range(2**4094, 2**4094 + 99999))",
    "enumerate(range(2**4094, 2**4094 + 99999))",
    "reversed(range(2**4094, 2**4094 + 99999))",
    "[*range(2**4094, 2**4094 + 99999)]",
]


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("source", BIG_INTEGERS)
def test_bytes_are_bounded_not_only_items(source, mode):
    err = fails(source, {})
    assert "memory limit of 32 MiB" in err.message


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("source", BIG_INTEGERS[:3])
def test_evaluator_process_rss_stays_bounded(source):
    assert run_isolated("expr", "[x for x in a]", {"a": [0]}, LIMITS) == [0]
    worker = pool().idle[-1]
    before = _peak_rss(worker.proc.pid)
    with pytest.raises(ExpressionError):
        run_isolated("expr", source, {}, LIMITS)
    assert worker in pool().idle  # a refusal keeps the worker
    grown = _peak_rss(worker.proc.pid) - before
    assert grown < 8 * MIB, f"{source} grew the evaluator by {grown / MIB:.0f} MiB"


@pytest.mark.parametrize("source", BIG_INTEGERS[:3])
def test_inline_allocation_stays_bounded(source):
    tracemalloc.start()
    try:
        with pytest.raises(ExpressionError):
            evaluate_inline(source, {}, LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB, peak


def test_bytes_count_character_width_and_garbage():
    small = Limits(memory_bytes=4 * MIB)
    state = {"a": "a" * 99_990, "e": "😀" * 99_990}
    # 19 strings of 100_000 ASCII characters are 1.9 MB; of 4-byte characters 7.6 MB.
    assert len(evaluate_inline("[a + str(i) for i in range(19)]", state, small)) == 19
    with pytest.raises(ExpressionError) as info:
        evaluate_inline("[e + str(i) for i in range(19)]", state, small)
    assert "memory limit of 4 MiB" in info.value.message
    # Garbage counts too: each string is dropped at once, the allocations add up.
    with pytest.raises(ExpressionError):
        evaluate_inline("[len(e + str(i)) for i in range(19)]", state, small)


def test_template_bytes_are_bounded(mode):
    # 57 MB of integers each: two are over the 64 MiB of a render.
    err = template_fails("{{ (range(2**4094, 2**4094 + 99999) | list | length) + "
                         "(range(2**4094, 2**4094 + 99999) | reverse | list | length) }}", {})
    assert "memory limit of 64 MiB" in err.message
    err = template_fails("{{ range(2**4094, 2**4094 + 99999) | list | length }}"
                         "{% for x in range(2**4094, 2**4094 + 60000) %}{% endfor %}", {})
    assert "memory limit" in err.message
    assert render_template("{{ range(5) | list | length }}", {}) == "5"


def test_memory_budget_setting(settings):
    settings.BALLAST_EXPRESSION_ISOLATION = "inline"
    settings.BALLAST_EXPRESSION_MEMORY_BUDGET_MB = 1
    with pytest.raises(ExpressionError) as info:
        evaluate("list(range(2**4000, 2**4000 + 5000))", {})
    assert "memory limit of 1 MiB" in info.value.message
    settings.BALLAST_EXPRESSION_MEMORY_BUDGET_MB = 0
    with pytest.raises(ExpressionError) as info:
        evaluate("1 + x", {"x": 1})
    assert "BALLAST_EXPRESSION_MEMORY_BUDGET_MB" in info.value.message


def test_bytes_of_counts_shared_values_once():
    g = Guard(LIMITS)
    row = "x" * 10_000
    one = g.bytes_of([row])
    assert 10_000 < one < 11_000
    assert g.bytes_of([row] * 1000) < one + 9000  # 1000 slots, one string
    assert g.bytes_of([row + str(i) for i in range(1000)]) > 10_000_000
    assert g.bytes_of([row] * (LIMITS.items + 1)) > 10**15  # past the walk's bound


# ---------------------------------------------------------------------------------------
# Operations that cannot be interrupted: checked before they run


def _uninterruptible_state() -> dict:
    long = "x" * 100_000
    other = "x" * 99_999 + "x"  # equal, another object: compared character by character
    return {
        "hay": "a" * 10_000_000,
        "needle": "a" * 50 + "b",
        "rows_a": [long] * 100_000,
        "rows_b": [other] * 100_000,
        "other": other,
        "names": ["n" * 1000 + str(i) for i in range(20_000)],
    }


# Each ran for 0.3 to 10 s inside one C call (10**10 characters compared, a quadratic-ish
# search of 10 million characters, a sort of strings with a 1000-character common prefix).
UNINTERRUPTIBLE = [
    "rows_a == rows_b",
    "rows_a < rows_b",
    "other in rows_a",
    "rows_a.count(other)",
    "rows_a.index(other)",
    "needle in hay",
    "hay.find(needle)",
    "hay.count(needle)",
    "hay.index(needle)",
    "hay.split(needle)",
    "hay.replace(needle, 'x')",
    "sorted(names)",
    "max(rows_a, rows_b)",
]


@pytest.mark.parametrize("source", UNINTERRUPTIBLE)
def test_uninterruptible_operations_are_refused_before_they_run(source, mode):
    state = _uninterruptible_state()
    err = fails(source, state)
    assert "cannot be interrupted" in err.message


UNINTERRUPTIBLE_TEMPLATES = [
    "{{ rows_a == rows_b }}",
    "{{ other in rows_a }}",
    "{{ needle in hay }}",
    "{{ needle is in hay }}",
    "{{ rows_a is eq rows_b }}",
    "{{ names | sort | first }}",
    "{{ [rows_a, rows_b] | max | length }}",
    "{{ names | unique | list | length }}",
    "{{ [rows_a] | select('eq', rows_b) | list | length }}",
]


@pytest.mark.parametrize("source", UNINTERRUPTIBLE_TEMPLATES)
def test_uninterruptible_template_operations_are_refused(source, mode):
    err = template_fails(source, _uninterruptible_state())
    assert "cannot be interrupted" in err.message


def test_ordinary_comparisons_and_searches_still_work(mode):
    state = {"rows": list(range(100_000)), "text": "abc" * 1000, "tags": ["vip", "eu"], "s": "a" * 100_000}
    assert evaluate("99_999 in rows and 'cab' in text and 'vip' in tags", state) is True
    assert evaluate("rows == rows and sorted(rows)[-1] == 99_999 and max(rows) == 99_999", state) is True
    assert evaluate("s == 'a' * 100_000 and s.count('a') == 100_000 and text.find('ca') == 2", state) is True
    assert render_template("{{ 'vip' in tags }} {{ 1 < 2 < 3 }} {{ 3 < 2 < 4 }} {{ tags | sort | first }}",
                           state) == "True True False eu"
    assert render_template("{{ tags | select('eq', 'eu') | list }}", state) == "['eu']"


# ---------------------------------------------------------------------------------------
# Case mapping


@pytest.mark.parametrize("source", [
    "('ß' * 60_000).upper()",  # 120_000 characters from 60_000
    "('ΐ' * 40_000).upper()",  # three characters each
    "('ß' * 60_000).swapcase()",
    "('ﬃ' * 40_000).casefold()",
    "s.lower()",  # a state string over the limit is refused before it is mapped
])
def test_case_mapping_cannot_exceed_the_string_limit(source, mode):
    err = fails(source, {"s": "A" * 200_000})
    assert "string size limit of 100000" in err.message


def test_case_mapping_within_the_limit(mode):
    assert evaluate("('ß' * 30_000).upper()", {}) == "SS" * 30_000
    assert evaluate("s.upper()", {"s": "a" * 100_000}) == "A" * 100_000


def test_template_case_filters_cannot_exceed_the_string_limit(mode):
    state = {"s": "ß" * 150_000, "big": "a" * 300_000}
    err = template_fails("{{ s | upper | length }}", state)
    assert "string size limit of 200000" in err.message
    template_fails("{{ big | lower | length }}", state)
    template_fails("{{ s | urlencode | length }}", state)
    assert render_template("{{ s[:1000] | upper | length }}", state) == "2000"


# ---------------------------------------------------------------------------------------
# A deployment's finite hard RLIMIT_CPU

_RLIMIT_SCRIPT = textwrap.dedent("""
    import json, os, resource, sys, time
    import django
    os.environ["DJANGO_SETTINGS_MODULE"] = "ballast.settings"
    django.setup()
    cpu_limit = os.environ.get("TEST_CPU_LIMIT")
    if cpu_limit:
        # The limit for the test's work alone: a forked copy (CPU time from 0, Django already
        # set up) takes it, so the interpreter's own start, 3 s or more of CPU on a loaded
        # machine, is not counted against it (prlimit on the whole process had the kernel
        # kill this script instead of the sandbox's child). Children inherit it as a
        # deployment's limit.
        pid = os.fork()
        if pid:
            sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) % 256)
        resource.setrlimit(resource.RLIMIT_CPU, tuple(int(v) for v in cpu_limit.split(":")))
    from runs.sandbox.expressions import ExpressionError
    from runs.sandbox.limits import LIMITS, Limits
    from runs.sandbox import process
    from runs.sandbox.process import pool, run_isolated

    started = []  # the pid of every evaluator process this script starts
    init = process.EvaluatorProcess.__init__
    def record(self, *args):
        init(self, *args)
        started.append(self.proc.pid)
    process.EvaluatorProcess.__init__ = record

    out = {"values": [], "started": started}
    asked = Limits(timeout=float(sys.argv[2]))
    for i in range(int(sys.argv[1])):
        out["values"].append(run_isolated("expr", "[x * 2 for x in a]", {"a": [i]}, asked))
        for worker in pool().idle:
            for line in open(f"/proc/{worker.proc.pid}/limits"):
                if line.startswith("Max cpu time"):
                    out["child_cpu"] = line.split()[3:5]
        time.sleep(0.05)
    try:
        runaway = Limits(int_bits=10**12, memory_bytes=10**13, iterations=10**12, items=10**12, budget=10**15,
                         scan_steps=10**15, timeout=float(sys.argv[3]))
        run_isolated("expr", sys.argv[4], {}, runaway)
        out["runaway"] = "no error"
    except ExpressionError as exc:
        out["runaway"] = exc.code
    out["after"] = run_isolated("expr", "[x for x in a]", {"a": [7]}, LIMITS)
    print(json.dumps(out))
""")


# Uninterruptible (one big-integer power): the parent kills the child past its time.
UNINTERRUPTIBLE = "9**9**9"
# Pure CPU in constant memory, so only a time limit stops it: 9**9**9 also grows towards the
# memory backstop, and which of the two came first would depend on the machine's speed.
CPU_ONLY = "[x for x in range(10**9) if x < 0]"


def _run_under_cpu_limit(soft: int, hard: int, count: int, timeout: float = 0.5, runaway_timeout: float = 0.5, *,
                         unprivileged: bool = False, runaway: str = UNINTERRUPTIBLE, after_start: bool = False) -> dict:
    # after_start: the limit is set inside the script once Django is up (TEST_CPU_LIMIT), for
    # limits too tight to cover the interpreter's own start on a loaded machine.
    args = [sys.executable, "-c", _RLIMIT_SCRIPT, str(count), str(timeout), str(runaway_timeout), runaway]
    command = args if after_start else ["prlimit", f"--cpu={soft}:{hard}", "--", *args]
    if unprivileged:
        # Without CAP_SYS_RESOURCE a process cannot raise its hard limit (what a container does).
        command = ["setpriv", "--inh-caps=-sys_resource", "--bounding-set=-sys_resource", *command]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BALLAST_EXPRESSION_ISOLATION": "process"}
    if after_start:
        env["TEST_CPU_LIMIT"] = f"{soft}:{hard}"
    done = subprocess.run(command, capture_output=True, text=True, timeout=100, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not (Path("/usr/bin/prlimit").exists() or Path("/bin/prlimit").exists()), reason="needs prlimit")
@pytest.mark.parametrize("unprivileged", [False, True])
@pytest.mark.process
def test_evaluator_works_under_a_finite_hard_cpu_limit(unprivileged):
    if unprivileged and not Path("/usr/bin/setpriv").exists():
        pytest.skip("needs setpriv")
    out = _run_under_cpu_limit(60, 60, 3, unprivileged=unprivileged)
    assert out["values"] == [[0], [2], [4]]
    assert len(out["started"]) == 2  # one long-lived child served them; the runaway's replacement
    soft, hard = (int(v) for v in out["child_cpu"])
    assert hard == 60 and soft <= 60  # the deployment's hard limit is kept, never raised
    assert out["runaway"] == "timeout" and out["after"] == [7]


@pytest.mark.skipif(not Path("/usr/bin/prlimit").exists(), reason="needs prlimit")
@pytest.mark.process
def test_a_child_short_of_cpu_time_retires_and_is_replaced():
    # Requests that may take 2.8 s (+ 0.25 s grace) under a hard limit of 4 s: a fresh child
    # serves one, then (the limit counts whole seconds, so a second of margin) it cannot
    # give the next its full time: each retires after its reply and a new one starts.
    # The runaway may take 6 s, past the 4 s hard limit: whichever stops it (the kernel's
    # signal at the limit, or the parent at 6.25 s on a loaded machine) reads as a timeout.
    out = _run_under_cpu_limit(4, 4, 3, timeout=2.8, runaway_timeout=6, runaway=CPU_ONLY, after_start=True)
    assert out["values"] == [[0], [2], [4]]
    assert len(out["started"]) >= 4  # one per request (the runaway's too), then the last
    assert out["runaway"] == "timeout" and out["after"] == [7]


_HARD_KILL_SCRIPT = textwrap.dedent("""
    import math
    import os
    import resource
    import django
    os.environ["DJANGO_SETTINGS_MODULE"] = "ballast.settings"
    django.setup()
    # The hard CPU limit, set here rather than by prlimit on this whole process: this
    # process's own start (Django, imports) can use 3 s of CPU on a loaded machine, and the
    # kernel then killed it instead of the sandbox's child. The child inherits the limit
    # with its own CPU time starting at 0, so it is killed 3 s (or more) into its work.
    used = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(used.ru_utime + used.ru_stime) + 3
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))
    from runs.sandbox.expressions import ExpressionError
    from runs.sandbox.limits import Limits
    from runs.sandbox.process import run_isolated
    try:
        run_isolated("expr", "9**9**9", {}, Limits(int_bits=10**12, memory_bytes=10**13, timeout=30.0))
    except ExpressionError as exc:
        print(exc.code)
""")


@pytest.mark.process
def test_the_kernels_kill_at_the_hard_cpu_limit_reads_as_a_timeout():
    # The request may take 30 s; the kernel SIGKILLs the child at its hard CPU limit first.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _HARD_KILL_SCRIPT],
                          capture_output=True, text=True, timeout=100, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["timeout"]


# ---------------------------------------------------------------------------------------
# Messages that quote user values are bounded


def test_a_missing_huge_key_is_quoted_briefly(mode):
    err = fails("d[k]", {"d": {}, "k": "k" * 100_000}, code="error")
    assert len(err.message) < 400 and "(100000 characters)" in err.message


def test_round_quotes_a_huge_argument_briefly(mode):
    err = fails("round(1, rows)", {"rows": list(range(100_000))}, code="limit")
    assert len(err.message) < 400 and "(100000 items)" in err.message


def test_snapshot_paths_quote_keys_briefly():
    err = fails("d", {"d": {"k" * 100_000: {1, 2}}}, code="type")
    assert len(err.message) < 400 and "(100000 characters)" in err.message


def test_template_errors_quote_briefly(mode):
    err = template_fails("{{ d[k] + 1 }}", {"d": {}, "k": "k" * 100_000}, code="error")
    assert len(err.message) < 600, len(err.message)


def test_every_message_is_bounded():
    assert len(ExpressionError("x" * 10**6).message) <= MAX_MESSAGE_CHARS + 40
    assert len(Fault("limit", "y" * 10**6).reason) <= MAX_MESSAGE_CHARS + 40


def test_constant_parts_are_refused_at_validation_under_the_new_limits():
    for source in ["x + len(list(range(2**4094, 2**4094 + 99999)))", "x + ('ß' * 60000).upper()",
                   "x + len(sorted(['y' * 1000 + str(i) for i in range(10000)]))"]:
        with pytest.raises(ExpressionError) as info:
            check_constant_parts(source)
        assert info.value.code == "limit" and "constant part" in info.value.message
    check_constant_parts("x + len(list(range(2**100, 2**100 + 1000)))")


def test_template_limits_keep_the_byte_budget_above_the_character_budget():
    # 10 million characters built at one byte each must fit in the template byte budget.
    assert TEMPLATE_LIMITS.memory_bytes > TEMPLATE_LIMITS.budget
