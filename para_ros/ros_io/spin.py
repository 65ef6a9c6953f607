"""Spin an rclpy executor (or one node) until a condition holds or a deadline passes.

The one loop behind every place that spins in its own thread (the monitor, the recorders, the evaluation clients,
calibration capture) or waits for a message: callbacks run on the spinning thread, so ``condition`` sees their
effects between two ``spin_once`` calls.

Single-threaded executors only. rclpy's ``MultiThreadedExecutor`` hands a ready entity whose callback group is busy
to its thread pool again at every wake, and each of those handlers triggers the next wake at once; every
``spin_once`` also copies and scans the list of handlers not yet done. Once one callback is slow (a loaded machine
is enough) the list grows by thousands a second and the spinning thread takes a whole core, starving the graph it
watches (a simulator that stopped publishing, an evaluation that timed out). Every spinner here runs cheap callbacks
and makes its blocking calls (services) from another thread, so one thread is all it needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

OnError = Literal["raise", "continue", "stop"]


def spin_until(
    spinner,
    condition: Callable[[], bool],
    timeout_s: float | None = None,
    *,
    period_s: float = 0.05,
    on_error: OnError = "raise",
) -> bool:
    """Spin ``spinner`` until ``condition()`` holds (returns True) or ``timeout_s`` passed (returns False).

    :param spinner: an rclpy ``Executor`` (spun with ``spin_once``), or a ``Node`` (spun by a private single-threaded
        executor on the node's context, removed again before returning).
    :param condition: checked before the first spin and after every ``spin_once``; it must be cheap and must not block.
    :param timeout_s: seconds on the monotonic clock; None spins until ``condition`` holds (e.g. a background thread
        whose condition is "the context was shut down").
    :param period_s: the longest one ``spin_once`` waits for work (seconds): how soon a condition set by another
        thread (a stop flag) is noticed. The last wait is shortened so the deadline is kept.
    :param on_error: what an exception from ``spin_once`` (a callback, or the context shut down under it) does when
        ``condition()`` does not hold right after it: ``"raise"`` re-raises it, ``"continue"`` keeps spinning,
        ``"stop"`` returns False. When ``condition()`` holds after the exception (the usual shutdown race), the
        function returns True whatever ``on_error`` says.
    """
    if on_error not in ("raise", "continue", "stop"):
        raise ValueError(f"on_error must be 'raise', 'continue' or 'stop', not {on_error!r}")
    if period_s <= 0.0:
        raise ValueError(f"period_s must be > 0 s, got {period_s}")
    from rclpy.executors import MultiThreadedExecutor  # rclpy: loaded by whoever built the spinner

    if isinstance(spinner, MultiThreadedExecutor):
        raise TypeError(
            "spin_until spins single-threaded executors only: rclpy's MultiThreadedExecutor spun this way re-queues "
            "the entities of a busy callback group at every wake and can take a whole core (module docstring)"
        )
    if hasattr(spinner, "spin_once"):
        return _spin_executor_until(spinner, condition, timeout_s, period_s, on_error)
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor(context=spinner.context)
    executor.add_node(spinner)
    try:
        return _spin_executor_until(executor, condition, timeout_s, period_s, on_error)
    finally:
        executor.remove_node(spinner)
        executor.shutdown(timeout_sec=0.0)


def _spin_executor_until(executor, condition, timeout_s, period_s, on_error) -> bool:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not condition():
        wait_s = period_s
        if deadline is not None:
            left_s = deadline - time.monotonic()
            if left_s <= 0.0:
                return False
            wait_s = min(period_s, left_s)
        try:
            executor.spin_once(timeout_sec=wait_s)
        except Exception:
            if condition():
                return True
            if on_error == "raise":
                raise
            if on_error == "stop":
                return False
    return True
