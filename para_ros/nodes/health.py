"""A node's health: counters, current problems and their throttled log lines, published as ``/diagnostics``.

The one diagnostics helper of every node (inference_node, chunk_executor, sim_node). One ``DiagnosticStatus`` per
node: level = worst active problem, message = the newest problem (or "ok"), values = counters, their rates over the
last period (``rate_hz.<counter>``), figures and every active problem by key. A problem is logged at most once per
``log_throttle_s`` per key (so two different problems are both logged, but one repeated at 30 Hz is not), and clears
when the condition is gone.

A node whose health is a snapshot of its own state machine (the executor: its state, counters and problems live in
``ExecutorCore``) passes ``source``: a function returning (level, message, values) that the status starts from; the
reporter's own problems and counters are added to it.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from para_ros.ros_io.event_handlers import publisher_without_default_events

# Levels as the message defines them (single bytes in rclpy: b'\x00' OK .. b'\x03' STALE; they compare in order).
OK, WARN, ERROR, STALE = (DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR, DiagnosticStatus.STALE)


class RollingMedians(dict):
    """Per key, the median of its last ``window`` samples: the figures a node reports as medians on /diagnostics
    (the inference node's latency stages, the simulator's publish delays). A dict of key -> deque of samples.
    Adding is cheap (an append, once per message); the medians are computed when they are read (once per report)."""

    def __init__(self, window: int = 500):
        super().__init__()
        self.window = window

    def add(self, key: str, sample: float) -> None:
        """Record ``sample`` under ``key``."""
        history = self.get(key)
        if history is None:
            history = self[key] = deque(maxlen=self.window)
        history.append(sample)

    def medians(self) -> dict[str, float]:
        """Each key's median over its window, now."""
        return {key: float(statistics.median(history)) for key, history in list(self.items()) if history}


class HealthReporter:
    """Collects a node's counters and problems and publishes them on ``/diagnostics`` (1 Hz and on every change)."""

    def __init__(
        self,
        node,
        name: str,
        hardware_id: str = "",
        period_s: float = 1.0,
        log_throttle_s: float = 2.0,
        source: Callable[[], tuple[int, str, dict]] | None = None,
        median_window: int = 500,
    ):
        if not period_s > 0:
            raise ValueError(f"diagnostics period {period_s!r} s must be > 0")
        self._node = node
        self._source = source
        self._publish_lock = threading.Lock()  # one status at a time: a source may keep state between reports
        self._name = name
        self._hardware_id = hardware_id
        self._log_throttle_s = log_throttle_s
        self._lock = threading.Lock()
        self._problems: dict[str, tuple[int, str]] = {}
        self._last_logged: dict[str, float] = {}
        self._counters: dict[str, int] = {}
        self._values: dict[str, str] = {}
        self._medians = RollingMedians(window=median_window)  # add_sample: reported as each key's median
        self._rate_base: tuple[float, dict[str, int]] = (time.monotonic(), {})
        self._rates_hz: dict[str, float] = {}
        # The stamp of each report (ns); None: the node's clock now. A lockstep executor stamps with the instant it
        # ticks, which its clock (the simulator's /clock) may not have reached yet.
        self.stamp_ns: Callable[[], int | None] | None = None
        self.last_error = ""
        self._pub = node.create_publisher(
            DiagnosticArray,
            "/diagnostics",
            10,  # every node: no per-wake polling
            **publisher_without_default_events(),
        )
        self._timer = node.create_timer(period_s, self._on_timer)

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counters[key] = self._counters.get(key, 0) + n

    def set_value(self, key: str, value) -> None:
        with self._lock:
            self._values[key] = str(value)

    def add_sample(self, key: str, sample: float) -> None:
        """One more sample of a figure reported as the median of its last ``median_window`` samples (``key`` on
        /diagnostics, 3 decimals): cheap per message, the median is taken at each report."""
        with self._lock:
            self._medians.add(key, float(sample))

    def clear_samples(self) -> None:
        """Forget every ``add_sample`` sample (so the medians describe only what comes next)."""
        with self._lock:
            self._medians.clear()

    def problem(self, key: str, message: str, level: int = WARN) -> None:
        """Report an active problem (logged, throttled per key) and publish at once if it is new or changed."""
        now = time.monotonic()
        with self._lock:
            changed = self._problems.get(key) != (level, message)
            self._problems[key] = (level, message)
            self.last_error = f"{key}: {message}"
            self._counters[f"problems.{key}"] = self._counters.get(f"problems.{key}", 0) + 1
            due = now - self._last_logged.get(key, -1e9) >= self._log_throttle_s
            if due:
                self._last_logged[key] = now
        if due:
            # Two call sites, not one: rclpy keys a logger's state by the calling line and raises ValueError ("Logger
            # severity cannot be changed between calls") when one line logs at two severities, which would turn the
            # first ERROR after a WARN into an exception in the caller (the inference thread's error handler).
            log = self._node.get_logger()
            if level >= ERROR:
                log.error(f"[{key}] {message}")
            else:
                log.warning(f"[{key}] {message}")
        if changed:
            self.publish()

    def fault(self, key: str, message: str) -> None:
        """``problem`` at level ERROR (for callers that do not deal in diagnostics levels: ROS-free cores)."""
        self.problem(key, message, level=ERROR)

    def clear(self, key: str) -> None:
        with self._lock:
            changed = self._problems.pop(key, None) is not None
        if changed:
            self.publish()

    def status(self) -> DiagnosticStatus:
        base_level, base_message, base_values = self._source() if self._source is not None else (OK, "", {})
        with self._lock:
            level = max([base_level] + [lvl for lvl, _ in self._problems.values()])
            newest = next(reversed(self._problems.items()), None)
            message = f"{newest[0]}: {newest[1][1]}" if newest else "ok"
            if self._source is not None:
                message = base_message + (f"; {message}" if newest else "")
            values = [KeyValue(key=k, value=str(v)) for k, v in base_values.items()]
            values += [KeyValue(key=k, value=str(v)) for k, v in sorted(self._counters.items())]
            values += [KeyValue(key=f"rate_hz.{k}", value=f"{r:.2f}") for k, r in sorted(self._rates_hz.items())]
            values += [KeyValue(key=k, value=v) for k, v in sorted(self._values.items())]
            values += [KeyValue(key=k, value=f"{m:.3f}") for k, m in sorted(self._medians.medians().items())]
            values += [KeyValue(key=f"problem.{k}", value=m) for k, (_, m) in self._problems.items()]
            if self._source is None or self.last_error:
                values.append(KeyValue(key="last_error", value=self.last_error))
        return DiagnosticStatus(
            level=level, name=self._name, message=message, hardware_id=self._hardware_id, values=values
        )

    def update_rates(self) -> None:
        """Rates of every counter (per second) since the previous update; called by the 1 Hz timer."""
        now = time.monotonic()
        with self._lock:
            t0, base = self._rate_base
            if now - t0 >= 0.5:
                self._rates_hz = {
                    k: (v - base.get(k, 0)) / (now - t0)
                    for k, v in self._counters.items()
                    if not k.startswith("problems.")
                }
                self._rate_base = (now, dict(self._counters))

    def _on_timer(self) -> None:
        self.update_rates()
        self.publish()

    def publish(self) -> None:
        with self._publish_lock:
            msg = DiagnosticArray()
            stamp_ns = self.stamp_ns() if self.stamp_ns is not None else None
            if stamp_ns is None:
                msg.header.stamp = self._node.get_clock().now().to_msg()
            else:
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
            msg.status = [self.status()]
            self._pub.publish(msg)
