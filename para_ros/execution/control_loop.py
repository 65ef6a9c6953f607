"""A fixed-rate loop in its own thread: absolute deadlines on the monotonic clock, missed ticks skipped, stats kept.

Why a thread and not an rclpy timer: the control loop must keep its rate while the ROS executor is busy with a
flood of chunk messages, and a Python timer callback shares that executor. Ticks are scheduled at
``t0 + k * period`` (no drift); a tick that starts late is run once and the missed deadlines are skipped
(counted in ``overruns``), so the loop never bursts to catch up. Each tick records its start error (start time minus
its deadline) and its compute time.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np


def request_fifo(priority: int) -> str:
    """Ask SCHED_FIFO ``priority`` for the calling thread (Linux); what it got: ``"SCHED_FIFO <p>"`` or
    ``"normal (SCHED_FIFO <p> refused: <why>)"``. The thread runs either way."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))  # 0: the calling thread
    except (OSError, AttributeError) as err:
        return f"normal (SCHED_FIFO {priority} refused: {err})"
    return f"SCHED_FIFO {priority}"


def raise_ros_thread_priority(control_priority: int, control_scheduler: str) -> str:
    """In the thread that will spin the node: SCHED_FIFO one level below the control thread, or why not.

    The control thread needs the GIL, and the thread most likely to hold it is this one (callbacks: joint states at
    the arm's rate, chunks). At normal priority the OS may preempt it for the simulator or the model while it holds
    the GIL, and the real-time control thread then waits behind it (priority inversion); one level below, it runs
    its callbacks to the end, and rclpy's wait releases the GIL between them. Only when the control thread did get
    ``SCHED_FIFO control_priority`` (``control_scheduler``, what :class:`FixedRateLoop` reports) and there is a level
    below it (priority >= 2). Threads this thread starts later inherit the level (Linux)."""
    if control_priority <= 0:
        return "normal"
    if control_scheduler != f"SCHED_FIFO {control_priority}":
        return "normal (the control thread is not real-time)"
    if control_priority < 2:
        return "normal (control_thread_priority 1 has no real-time level below it)"
    return request_fifo(int(control_priority) - 1)


class FixedRateLoop:
    """Call ``tick()`` at ``rate_hz`` in a daemon thread until :meth:`stop`.

    :param rate_hz: tick rate (Hz).
    :param tick: the work of one tick; exceptions are caught, counted and handed to ``on_error``.
    :param stats_window: how many recent ticks the period/compute statistics cover.
    :param clock: monotonic time source in seconds (tests pass a simulated one).
    :param wait: ``wait(timeout_s)`` sleeps until the next deadline (default: an interruptible wait that
        :meth:`stop` ends early); a simulated clock's ``wait`` advances that clock.
    :param priority: 1..99: the loop's thread asks Linux for the real-time ``SCHED_FIFO`` scheduler at this priority
        (needs root, ``CAP_SYS_NICE`` or an ``rtprio`` limit), so a busy machine (the simulator and the model on the
        same cores) cannot delay its wake-ups; 0 (default): the normal scheduler. :attr:`scheduler` says what it got.
    """

    def __init__(
        self,
        rate_hz: float,
        tick: Callable[[], None],
        name: str = "control_loop",
        stats_window: int = 10000,
        on_error: Callable[[BaseException], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], object] | None = None,
        priority: int = 0,
    ):
        if not (np.isfinite(rate_hz) and rate_hz > 0):
            raise ValueError(f"FixedRateLoop rate_hz={rate_hz!r}: must be a finite number > 0")
        if not 0 <= int(priority) <= 99:
            raise ValueError(f"FixedRateLoop priority={priority!r}: use 0 (normal) or a SCHED_FIFO priority 1..99")
        self.priority = int(priority)
        self.scheduler = "normal"
        self.scheduler_applied = threading.Event()  # set once the loop's thread has asked for its scheduler
        self.period_s = 1.0 / rate_hz
        self._tick = tick
        self._on_error = on_error
        self._name = name
        self._stop = threading.Event()
        self._clock = clock
        self._wait = wait if wait is not None else self._stop.wait
        self._thread: threading.Thread | None = None
        self.start_errors_s: deque[float] = deque(maxlen=stats_window)
        self.compute_s: deque[float] = deque(maxlen=stats_window)
        self.start_times_s: deque[float] = deque(maxlen=stats_window)
        self.overruns = 0
        self.errors = 0
        self.ticks = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _apply_priority(self) -> None:
        """In the loop's thread: the real-time scheduler it asked for, or a note why not (it runs either way)."""
        try:
            if self.priority > 0:
                self.scheduler = request_fifo(self.priority)
        finally:
            self.scheduler_applied.set()  # the node waits for this before its own thread's change

    def run(self, max_ticks: int | None = None) -> None:
        """The loop itself, in the calling thread, until :meth:`stop` (or ``max_ticks`` ticks); :meth:`start` runs
        it in a daemon thread."""
        self._apply_priority()
        deadline = self._clock()
        n = 0
        while not self._stop.is_set() and (max_ticks is None or n < max_ticks):
            n += 1
            start = self._clock()
            self.start_errors_s.append(start - deadline)
            self.start_times_s.append(start)
            try:
                self._tick()
            except BaseException as err:  # noqa: BLE001 - the loop must survive any tick failure
                self.errors += 1
                if self._on_error is not None:
                    self._on_error(err)
            end = self._clock()
            self.compute_s.append(end - start)
            self.ticks += 1
            deadline += self.period_s
            if end > deadline:  # late: skip the deadlines already missed
                missed = int((end - deadline) / self.period_s) + 1
                self.overruns += missed
                deadline += missed * self.period_s
            self._wait(max(deadline - self._clock(), 0.0))

    def stats(self) -> dict[str, float]:
        """Median/p99/max over the recent ticks (seconds) of: the start error (start - deadline), the period error
        (|time between successive tick starts - period|) and the compute time."""
        out: dict[str, float] = {"ticks": float(self.ticks), "overruns": float(self.overruns)}
        starts = np.asarray(self.start_times_s, dtype=float)
        period_err = np.abs(np.diff(starts) - self.period_s) if starts.size > 1 else np.zeros(0)
        for name, values in (
            ("start_error", self.start_errors_s),
            ("period_error", period_err),
            ("compute", self.compute_s),
        ):
            arr = np.asarray(values, dtype=float)
            if arr.size:
                out[f"{name}_median_s"] = float(np.median(arr))
                out[f"{name}_p99_s"] = float(np.percentile(arr, 99))
                out[f"{name}_max_s"] = float(arr.max())
        return out
