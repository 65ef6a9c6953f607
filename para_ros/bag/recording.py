"""Record serialized ROS messages into a rosbag2 bag in MCAP storage, without ROS (``rosbags`` writes it).

The messages arrive as the CDR bytes DDS delivered (rclpy ``raw=True`` subscriptions), so nothing is deserialized and
re-serialized. The bag opens with ``ros2 bag play/info`` (rosbag2 ``mcap`` plugin), Foxglove, and
``rosbags.rosbag2.Reader``. Types come from rosbags' Kilted type store plus the project's own ``para_msgs``
definitions read from their ``.msg`` files.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from para_ros.paths import REPO_ROOT

STATIC_TOPICS = ("/tf_static",)  # recorded with TRANSIENT_LOCAL offered QoS so playback latches them


def _msg_file(package: str, name: str) -> Path:
    """The ``.msg`` file of ``package/msg/name``: installed share dirs first, then the source checkout."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p] + [sys.prefix]
    candidates = [Path(p) / "share" / package / "msg" / f"{name}.msg" for p in prefixes]
    candidates.append(REPO_ROOT / "interfaces" / package / "msg" / f"{name}.msg")
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"{package}/msg/{name}.msg not found; looked in: " + ", ".join(map(str, candidates)))


def make_typestore():
    """rosbags type store with the ROS 2 Kilted types and ``para_msgs/msg/ActionChunk``."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # rosbags: loaded on first use, not on import

    store = get_typestore(Stores.ROS2_KILTED)
    text = _msg_file("para_msgs", "ActionChunk").read_text()
    store.register(get_types_from_msg(text, "para_msgs/msg/ActionChunk"))
    return store


def ros_type_name(msg_class) -> str:
    """``pkg/msg/Name`` of an rclpy message class (what rosbag2 stores as the topic type)."""
    module = msg_class.__module__.split(".")  # e.g. sensor_msgs.msg._image
    return f"{module[0]}/msg/{msg_class.__name__}"


class McapRecorder:
    """Thread-safe writer of raw CDR messages into ``path`` (a new rosbag2 directory with one ``.mcap`` file)."""

    def __init__(self, path: str | os.PathLike, topics: dict[str, str]):
        """:param topics: topic -> ``pkg/msg/Name`` of every topic that will be written."""
        # rosbags: loaded on first use, not on import
        from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
        from rosbags.rosbag2 import StoragePlugin, Writer  # rosbags: loaded on first use, not on import

        self.path = Path(path)
        self._lock = threading.Lock()
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        store = make_typestore()
        self.counts: dict[str, int] = {}
        self._connections = {}
        for topic, msgtype in topics.items():
            qos = ()
            if topic in STATIC_TOPICS:
                never = QosTime(sec=0x7FFFFFFF, nsec=0xFFFFFFFF)
                qos = (
                    Qos(
                        history=QosHistory.KEEP_LAST,
                        depth=100,
                        reliability=QosReliability.RELIABLE,
                        durability=QosDurability.TRANSIENT_LOCAL,
                        deadline=never,
                        lifespan=never,
                        liveliness=QosLiveliness.AUTOMATIC,
                        liveliness_lease_duration=never,
                        avoid_ros_namespace_conventions=False,
                    ),
                )
            self._connections[topic] = self._writer.add_connection(
                topic, msgtype, typestore=store, offered_qos_profiles=qos
            )
            self.counts[topic] = 0
        self.closed = False

    def write(self, topic: str, stamp_ns: int, data: bytes) -> None:
        """Write one message (``stamp_ns``: receive time, wall clock ns) unless the bag is closed."""
        with self._lock:
            if self.closed:
                return
            self._writer.write(self._connections[topic], int(stamp_ns), bytes(data))
            self.counts[topic] += 1

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._writer.close()

    def mcap_files(self) -> list[Path]:
        return sorted(self.path.glob("*.mcap"))
