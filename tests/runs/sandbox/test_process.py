"""The guarded evaluator process: the backstop with the pre-checks switched off, respawn, threads and fork."""
from __future__ import annotations

import io
import os
import pickle
import signal
import threading

import pytest

from runs.sandbox.errors import ExpressionError
from runs.sandbox.expressions import evaluate
from runs.sandbox.limits import LIMITS, Limits
from runs.sandbox.process import EVALUATORS, ResultUnpickler, pool, run_isolated
from runs.sandbox.templating import TEMPLATE_LIMITS
from tests.support.bounded import assert_fails_fast

pytestmark = pytest.mark.timeout(60)


def isolated(kind: str, limits: Limits):
    """run(source, state) for assert_fails_fast: evaluate in the evaluator process under ``limits``.

    An idle evaluator process is started first: the bound under test is how soon an
    overrun is stopped, not how long a fresh interpreter takes to start on a busy machine.
    """
    assert run_isolated("expr", "[x for x in a]", {"a": [0]}, LIMITS) == [0]
    return lambda source, state: run_isolated(kind, source, state, limits)


def test_backstop_kills_runaway_cpu():
    # With the integer check disabled, 9**9**9 would run for minutes inside one C call.
    no_int_limit = Limits(int_bits=10**12, memory_bytes=10**13)
    assert_fails_fast(isolated("expr", no_int_limit), ExpressionError, "9**9**9", {}, "timeout", 1.0)
    # The next evaluation gets a fresh process.
    assert run_isolated("expr", "[x for x in a]", {"a": [1]}, LIMITS) == [1]


def test_backstop_kills_runaway_template():
    no_int_limit = Limits(**{**vars(TEMPLATE_LIMITS), "int_bits": 10**12, "memory_bytes": 10**13})
    err = assert_fails_fast(isolated("template", no_int_limit), ExpressionError, "{{ 9 ** (9 ** 9) }}", {},
                            "timeout", 1.0)
    assert err.message.startswith("template took longer")
    assert run_isolated("template", "{% for i in a %}{{ i }}{% endfor %}", {"a": [1, 2]}, TEMPLATE_LIMITS) == "12"


@pytest.mark.parametrize("source", ["'a' * 10**10", "[0] * 10**9"])
def test_backstop_bounds_memory(source):
    no_size_limit = Limits(string_chars=10**12, items=10**12, budget=10**13, memory_bytes=10**13)
    assert_fails_fast(isolated("expr", no_size_limit), ExpressionError, source, {}, "memory", 1.0)
    assert run_isolated("expr", "[x for x in a]", {"a": [2]}, LIMITS) == [2]


def test_child_errors_keep_their_code_and_position():
    err = assert_fails_fast(isolated("expr", LIMITS), ExpressionError, "[x for x in a] + b", {"a": [1]},
                            "unknown_name", 1.0)
    assert err.name == "b"
    err = assert_fails_fast(isolated("template", TEMPLATE_LIMITS), ExpressionError, "a\n{{ 1 // 0 }}", {},
                            "error", 1.0)
    assert err.position == (2, 1) and "division by zero" in err.message


def test_a_process_killed_from_outside_is_replaced():
    assert run_isolated("expr", "[x for x in a]", {"a": [3]}, LIMITS) == [3]
    for worker in list(pool().idle):
        os.kill(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait(timeout=5)
    assert run_isolated("expr", "[x for x in a]", {"a": [4]}, LIMITS) == [4]
    assert all(w.proc.poll() is None for w in pool().idle)


def test_every_evaluator_kind_is_importable():
    import importlib

    for module, function in EVALUATORS.values():
        assert callable(getattr(importlib.import_module(module), function))


def test_result_unpickler_refuses_code():
    payload = pickle.dumps(("ok", os.system))
    with pytest.raises(pickle.UnpicklingError):
        ResultUnpickler(io.BytesIO(payload)).load()
    assert ResultUnpickler(io.BytesIO(pickle.dumps(("ok", {1, 2}, range(3))))).load() == ("ok", {1, 2}, range(3))


def test_threads_share_the_pool(settings):
    settings.BALLAST_EXPRESSION_ISOLATION = "process"
    settings.BALLAST_EXPRESSION_WORKERS = 2
    state = {"items": [3, 1, 2], "order": {"total": 150.5}}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(20):
                assert evaluate("[x * k for x in items]", {**state, "k": k + i}) == [3 * (k + i), k + i, 2 * (k + i)]
                assert evaluate("order.total > k", {**state, "k": k}) is True
                with pytest.raises(ExpressionError):
                    evaluate("'a' * 10**9", state)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(pool().live) <= 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_starts_its_own_evaluator(settings):
    settings.BALLAST_EXPRESSION_ISOLATION = "process"
    assert evaluate("[x + 1 for x in a]", {"a": [1]}) == [2]  # the parent's pool is running
    parent_workers = {w.proc.pid for w in pool().live}
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: like a django-q2 worker forked from the cluster
        try:
            os.close(read_fd)
            value = evaluate("[x + 1 for x in a]", {"a": [41]})
            mine = {w.proc.pid for w in pool().live}
            try:
                evaluate("9**9**9", {})
                hostile = "no error"
            except ExpressionError as exc:
                hostile = exc.code
            os.write(write_fd, pickle.dumps((value, bool(mine & parent_workers), hostile)))
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    value, shared, hostile = pickle.loads(data)
    assert value == [42] and not shared and hostile == "limit"
    assert evaluate("[x + 1 for x in a]", {"a": [2]}) == [3]  # the parent's pool still works
