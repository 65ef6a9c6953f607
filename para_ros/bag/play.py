"""``para-bag play``: publish a rosbag2 recording into the live graph with its original timing (no ROS install needed).

Every message goes out as the CDR bytes stored in the bag (nothing is deserialised), on its topic (or a remapped
one), at ``t0 + (log_time - first_log_time - start_offset) / rate`` on the steady clock, so the real inference node
and rviz see the recording as they would see the rig. ``/tf_static`` is published TRANSIENT_LOCAL (latched), like
``ros2 bag play``. With ``--clock`` a ``rosgraph_msgs/Clock`` of the recording's time goes out on ``/clock`` at
``clock_rate_hz`` (and before every message), so nodes started with ``use_sim_time:=true`` run on recorded time:
their TF lookups at the image stamps work however old the recording is. ``--loop`` replays until Ctrl-C (the clock
jumps back at each restart, as it does with ``ros2 bag play --loop``).

On a ROS machine the equivalent is ``ros2 bag play BAG --clock 100 --rate R --start-offset S [--loop]
[--remap FROM:=TO]``.
"""

from __future__ import annotations

import importlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

STATIC_TOPICS = ("/tf_static",)


@dataclass
class PlayOptions:
    """What ``para-bag play`` takes (see the module docstring)."""

    bag: str
    rate: float = 1.0
    start_offset_s: float = 0.0
    loop: bool = False
    clock: bool = False
    clock_rate_hz: float = 100.0
    remaps: dict = field(default_factory=dict)
    topics: tuple = ()  # empty = every topic

    def __post_init__(self):
        if not 0.01 <= self.rate <= 100.0:
            raise ValueError(f"--rate {self.rate}: use a factor within 0.01..100")
        if self.start_offset_s < 0:
            raise ValueError(f"--start-offset {self.start_offset_s}: use a value >= 0 s")
        if not 1.0 <= self.clock_rate_hz <= 1000.0:
            raise ValueError(f"--clock-rate {self.clock_rate_hz}: use 1..1000 Hz")
        for src, dst in self.remaps.items():
            if not (src.startswith("/") and dst.startswith("/")):
                raise ValueError(f"--remap {src}:={dst}: give absolute topic names, e.g. /a:=/b")


def parse_remaps(items) -> dict:
    out = {}
    for item in items or ():
        if ":=" not in item:
            raise ValueError(f"--remap {item!r}: use FROM:=TO, e.g. /camera/image_raw:=/scene_cam/image_raw")
        src, dst = item.split(":=", 1)
        out[src.strip()] = dst.strip()
    return out


def message_class(msgtype: str):
    """``pkg/msg/Name`` -> the rclpy message class (raises ValueError naming the package to install)."""
    pkg, kind, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    except (ImportError, AttributeError):
        raise ValueError(
            f"message type {msgtype} is not importable here: install/build the {pkg} interfaces, or "
            f"leave the topic out (--topics)"
        ) from None


class BagPlayer:
    """Publishes one bag (see the module docstring). ``published`` counts messages per output topic."""

    def __init__(self, options: PlayOptions, stop: threading.Event | None = None):
        self.options = options
        self.stop = stop or threading.Event()
        self.published: dict[str, int] = {}
        self.loops = 0

    def run(self) -> dict[str, int]:
        import rclpy  # rclpy: loaded on first use, not on import
        from builtin_interfaces.msg import Time
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from rosbags.rosbag2 import Reader  # rosbags: loaded on first use, not on import
        from rosgraph_msgs.msg import Clock  # rclpy: loaded on first use, not on import

        o = self.options
        ctx = rclpy.Context()
        rclpy.init(context=ctx, signal_handler_options=SignalHandlerOptions.NO)
        node = rclpy.create_node("para_bag_player", context=ctx)
        try:
            with Reader(Path(o.bag)) as reader:
                conns = [c for c in reader.connections if not o.topics or c.topic in o.topics]
                if not conns:
                    raise ValueError(
                        f"{o.bag} has none of the topics {list(o.topics)}; it has "
                        f"{sorted({c.topic for c in reader.connections})}"
                    )
                pubs = {}
                for c in conns:
                    out_topic = o.remaps.get(c.topic, c.topic)
                    if out_topic in pubs:
                        continue
                    qos = QoSProfile(depth=100)
                    if c.topic in STATIC_TOPICS:
                        qos = QoSProfile(
                            depth=100,
                            durability=DurabilityPolicy.TRANSIENT_LOCAL,
                            reliability=ReliabilityPolicy.RELIABLE,
                        )
                    pubs[c.topic] = node.create_publisher(message_class(c.msgtype), out_topic, qos)
                    self.published[out_topic] = 0
                clock_pub = node.create_publisher(Clock, "/clock", QoSProfile(depth=10)) if o.clock else None
                t_first = reader.start_time + int(o.start_offset_s * 1e9)
                time.sleep(0.5)  # let subscribers match before the first message
                while not self.stop.is_set():
                    t0 = time.monotonic()
                    next_clock = t0
                    for conn, t_log, raw in reader.messages(connections=conns):
                        if t_log < t_first:
                            if conn.topic in STATIC_TOPICS:  # static data before the offset still applies
                                pubs[conn.topic].publish(bytes(raw))
                            continue
                        due = t0 + (t_log - t_first) / 1e9 / o.rate
                        while True:
                            now = time.monotonic()
                            if self.stop.is_set():
                                return self.published
                            if clock_pub is not None and now >= next_clock:
                                bag_ns = t_first + int((now - t0) * o.rate * 1e9)
                                clock_pub.publish(Clock(clock=Time(sec=bag_ns // 10**9, nanosec=bag_ns % 10**9)))
                                next_clock += 1.0 / o.clock_rate_hz
                            if now >= due:
                                break
                            time.sleep(
                                min(due - now, max(0.0, next_clock - now), 0.01) if clock_pub else min(due - now, 0.01)
                            )
                        if clock_pub is not None:
                            clock_pub.publish(Clock(clock=Time(sec=t_log // 10**9, nanosec=t_log % 10**9)))
                        pubs[conn.topic].publish(bytes(raw))
                        self.published[o.remaps.get(conn.topic, conn.topic)] += 1
                    self.loops += 1
                    if not o.loop:
                        break
                time.sleep(0.2)  # let the last messages leave
        finally:
            node.destroy_node()
            rclpy.try_shutdown(context=ctx)
        return self.published
