"""ROS time stamps <-> integer nanoseconds and float seconds: the one place these conversions live.

A ``builtin_interfaces/Time`` or ``Duration`` (rclpy or rosbags object alike) is ``sec`` + ``nanosec``. Stamps are
kept as integer nanoseconds wherever they are compared or paired (exact); float seconds only for arithmetic on
durations and for reports.
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000


def stamp_to_ns(stamp) -> int:
    """``Time``/``Duration`` -> integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_to_s(stamp) -> float:
    """``Time``/``Duration`` -> float seconds."""
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def ns_to_fields(t_ns: int) -> tuple[int, int]:
    """Integer nanoseconds -> (sec, nanosec) with 0 <= nanosec < 1e9."""
    return divmod(int(t_ns), NS_PER_S)


def s_to_fields(t_s: float) -> tuple[int, int]:
    """Float seconds -> (sec, nanosec), rounded to the nearest nanosecond."""
    return ns_to_fields(int(round(float(t_s) * 1e9)))


def s_to_ns(t_s: float) -> int:
    """Float seconds -> integer nanoseconds (rounded)."""
    return int(round(float(t_s) * 1e9))


def set_stamp(stamp, t_ns: int):
    """Write ``t_ns`` into a ``Time``/``Duration`` object in place; returns it."""
    stamp.sec, stamp.nanosec = ns_to_fields(t_ns)
    return stamp
