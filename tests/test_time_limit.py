"""core.system.time_limit: a call of pure Python that would never end is stopped, and nothing of the stop
reaches code that runs after a call that ended in time."""

from __future__ import annotations

import functools
import threading

import pytest

from core.system.time_limit import call_within


def _forever() -> None:
    while True:
        pass


def _forever_swallowing_errors() -> None:
    while True:
        try:
            sum(range(100))
        except Exception:  # noqa: BLE001 - what a careless template helper does; the stop must get through
            pass


def test_a_call_that_returns_in_time_gives_its_result():
    assert call_within(30, lambda: sum(range(10))) == 45


@pytest.mark.parametrize("function", [_forever, _forever_swallowing_errors])
def test_a_call_that_never_ends_is_stopped(function):
    with pytest.raises(TimeoutError, match="did not finish within 0.2 s"):
        call_within(0.2, function)


def test_a_call_in_another_thread_is_stopped_there():
    outcome: list[str] = []

    def worker() -> None:
        try:
            call_within(0.2, _forever)
        except TimeoutError:
            outcome.append("stopped")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=60)
    assert outcome == ["stopped"]


def _count_to(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def test_calls_that_end_at_the_limit_leave_nothing_pending():
    """Calls of every length around the limit: some end before it, some are stopped in it; either way the code
    after them runs undisturbed (a stop left pending would be raised there and fail this test)."""
    endings = []
    for n in range(0, 300_000, 1_000):
        try:
            assert call_within(0.002, functools.partial(_count_to, n)) == n * (n - 1) // 2
            endings.append("returned")
        except TimeoutError:
            endings.append("stopped")
        assert _count_to(5_000) == 12_497_500  # Python code that a stray stop would interrupt
    assert len(endings) == 300
