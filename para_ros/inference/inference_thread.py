"""The inference node's own thread: one inference step whenever a new image came, at most ``max_rate_hz``, and twice a
second without images, so that a silent camera is still reported.

Inference runs in its own thread, not in an executor callback: the ROS executor (one thread) only moves messages, so
images, CameraInfo and TF keep flowing while the model runs, and a TF look-up that waits for data (``tf_timeout_s``) is
served by the executor meanwhile. (A MultiThreadedExecutor whose busy callback group blocks a ready timer spins hot on
the GIL and starves both.) ROS-free: the node hands it its step and its rate parameter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

IDLE_STEP_S = 0.5  # without images, a step this often (the pairing check names a silent camera)


class InferenceThread:
    """Calls ``step`` after each :meth:`wake` (and every :data:`IDLE_STEP_S` without one), at most ``max_rate_hz()``
    times a second (read before each wait, so a changed rate takes effect at once). ``step`` must not raise."""

    def __init__(self, step: Callable[[], None], max_rate_hz: Callable[[], float], name: str = "para_inference"):
        self._step = step
        self._max_rate_hz = max_rate_hz
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Something new came (an image, a parameter change): step as soon as the rate allows."""
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the loop after the step in progress and wait for it (at most ``timeout_s``)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            min_period_s = 1.0 / self._max_rate_hz()
            t0 = time.monotonic()
            self._wake.wait(timeout=IDLE_STEP_S)
            self._wake.clear()
            if self._stop.is_set():
                break
            self._step()
            spare = min_period_s - (time.monotonic() - t0)
            if spare > 0:
                self._stop.wait(spare)
