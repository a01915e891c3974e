"""runs.vocabulary.CancelEvent: a step's cancel signal that also calls back a call blocked where it cannot look at the event."""
from __future__ import annotations

import threading

from runs.vocabulary import CancelEvent


def test_a_callback_runs_once_in_the_thread_that_sets_the_event():
    event = CancelEvent()
    calls: list[str] = []
    event.on_set(lambda: calls.append(threading.current_thread().name))
    setter = threading.Thread(target=event.set, name="setter")
    setter.start()
    setter.join()
    event.set()  # a second set calls nothing again
    assert event.is_set() and calls == ["setter"]


def test_a_callback_registered_after_the_set_runs_at_once():
    event = CancelEvent()
    event.set()
    calls: list[int] = []
    forget = event.on_set(lambda: calls.append(1))
    assert calls == [1]
    forget()  # a no-op now


def test_a_forgotten_callback_is_not_called():
    event = CancelEvent()
    calls: list[str] = []
    forget = event.on_set(lambda: calls.append("forgotten"))
    event.on_set(lambda: calls.append("kept"))
    forget()
    event.set()
    assert calls == ["kept"]


def test_a_callback_that_raises_does_not_keep_the_others_from_the_cancel(caplog):
    event = CancelEvent()
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    event.on_set(broken)
    event.on_set(lambda: calls.append("second"))
    event.set()
    assert event.is_set() and calls == ["second"]
    assert "a cancel callback raised" in caplog.text


def test_waiters_wake_as_with_a_plain_event():
    event = CancelEvent()
    woke = threading.Event()
    waiter = threading.Thread(target=lambda: event.wait(30) and woke.set())
    waiter.start()
    event.set()
    waiter.join(30)
    assert woke.is_set()
