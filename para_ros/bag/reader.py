"""Read a rosbag2 recording (mcap or sqlite3) offline into synchronised observations, with the live node's rules.

No ROS installation and no running node are needed: ``rosbags`` reads the bag and deserializes the messages; the
project adapters do everything else exactly as ``inference_node`` does (one concept, one place):

* TF: every ``/tf`` and ``/tf_static`` transform of the bag goes into a :class:`para_ros.adapters.tf.Buffer` (the
  project fallback, or tf2_ros where installed) whose cache spans the whole bag; lookups therefore interpolate
  between stamps (linear translation, slerp rotation) and refuse to extrapolate, like tf2.
* Pairing: scene/wrist frames go, in the bag's receive (log) order, through
  :class:`para_ros.observation.pairing.ObservationPairer` with the node's ``pair_slop_s`` and
  ``max_observation_age_s``; after every image the newest unused pair of nearest frames
  (:func:`para_ros.observation.pairing.nearest_pair`, the node's one rule) is taken, as a node that is never busy
  would (no frame is queued, out-of-order frames are dropped, a pair with one silent camera is stale); each
  observation carries its pair's time difference (``Observation.pair_gap_ns``). The pairer's clock
  ("now") is the newest image header stamp seen so far (the data's own clock: a bag's receive times may be wall time
  while the stamps are sim time), so the "future frame" check never fires offline.
* Images: rosbags' ``Image`` / ``CompressedImage`` objects are turned into ``sensor_msgs`` messages and decoded by
  :func:`para_ros.adapters.cv_bridge.image_msg_to_rgb`; intrinsics by
  :func:`para_ros.observation.camera_model.intrinsics_from_camera_info` (same size checks and ROS -> para_core pixel-convention
  conversion as the node; ``camera_matrix`` k or p). The CameraInfo used for
  a frame is the newest one received before it (or, at the very start of a bag, the first one of the bag).
* Poses: each camera's pose is ``world_frame <- CameraInfo.header.frame_id`` (or the image's frame id) at THAT image's
  stamp; the end-effector pose ``world_frame <- ee_frame`` at the observation stamp (the newer stamp of the pair).
* Gripper: ``/joint_states`` position of ``gripper_joint`` divided by ``gripper_open_position``, clipped to [0, 1],
  sample-and-hold at the stamp (the newest joint state stamped at or before it; before the first one, the first).

Image topics: ``image_transport: auto`` takes ``<image_topic>`` if the bag has it, else ``<image_topic>/compressed``.

Problems with single observations (a frame that does not decode, TF missing at one stamp) drop that observation and
are counted in :attr:`BagReader.stats`; problems with the bag as a whole (unreadable, empty, a topic or a TF frame
missing) raise :class:`BagError` naming what is missing and what the bag has.
"""

from __future__ import annotations

import array
import bisect
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from para_ros.bag.recording import make_typestore as _make
from para_ros.observation.builder import (
    GripperHistory,
    Observation,
    ObservationProblem,
    ObservationSettings,
    build_observation,
    gripper_opening,
)
from para_ros.observation.pairing import ObservationPairer, past_positions
from para_ros.paths import config_file
from para_ros.stamps import stamp_to_ns

DEFAULT_VIEW_TOPICS = {  # same defaults as inference_node (config/inference.yaml)
    "scene": ("/scene_cam/image_raw", "/scene_cam/camera_info"),
    "wrist": ("/wrist_cam/image_raw", "/wrist_cam/camera_info"),
}
IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
CAMERA_INFO_TYPE = "sensor_msgs/msg/CameraInfo"
TF_TYPE = "tf2_msgs/msg/TFMessage"
IMAGE_TRANSPORTS = ("auto", "raw", "compressed")


class BagError(RuntimeError):
    """The bag cannot be used as a whole (unreadable, empty, missing topic or TF frame); the message says why."""


def _fail(field_name: str, value, fix: str) -> None:
    raise ValueError(f"BagTopicConfig.{field_name} = {value!r}: {fix}")


@dataclass
class BagTopicConfig:
    """Which topics and frames of a bag make an observation (defaults = the inference node's defaults).

    Args:
        view_names: camera views in the policy's order, e.g. ``("scene", "wrist")``.
        image_topics: view -> image topic (``Image``; ``<topic>/compressed`` for ``CompressedImage``). Default:
            ``/<view>_cam/image_raw`` (``/scene_cam/image_raw``, ``/wrist_cam/image_raw``).
        info_topics: view -> CameraInfo topic. Default ``/<view>_cam/camera_info``.
        image_transport: ``auto`` (raw if the bag has it, else compressed) | ``raw`` | ``compressed``.
        tf_topic, tf_static_topic: TF topics (``tf2_msgs/TFMessage``).
        joint_states_topic: ``sensor_msgs/JointState`` topic with the gripper joint ("" = no gripper: 1.0, open).
        world_frame: frame of every pose (the robot base). ee_frame: the tool frame.
        gripper_joint: joint name of the gripper; gripper_open_position: its position when fully open (closed = 0).
        pair_slop_s: max stamp difference of a scene/wrist pair, seconds.
        max_observation_age_s: a pair older than this (vs the newest image) is stale: one camera is silent, seconds.
        camera_matrix: ``k`` (raw images) or ``p`` (rectified images) of the CameraInfo, as the node's parameter.
    """

    view_names: tuple[str, ...] = ("scene", "wrist")
    image_topics: dict[str, str] = field(default_factory=dict)
    info_topics: dict[str, str] = field(default_factory=dict)
    image_transport: str = "auto"
    tf_topic: str = "/tf"
    tf_static_topic: str = "/tf_static"
    joint_states_topic: str = "/joint_states"
    world_frame: str = "base"
    ee_frame: str = "grasp_site"
    gripper_joint: str = "gripper"
    gripper_open_position: float = 1.0
    pair_slop_s: float = 0.05
    max_observation_age_s: float = 1.0
    camera_matrix: str = "k"

    def __post_init__(self) -> None:
        if isinstance(self.view_names, str) or not self.view_names:
            _fail("view_names", self.view_names, 'pass a tuple of view names, e.g. ("scene", "wrist")')
        self.view_names = tuple(str(v) for v in self.view_names)
        self.image_topics = dict(self.image_topics)
        self.info_topics = dict(self.info_topics)
        for view in self.view_names:
            image_default, info_default = DEFAULT_VIEW_TOPICS.get(
                view, (f"/{view}_cam/image_raw", f"/{view}_cam/camera_info")
            )
            self.image_topics.setdefault(view, image_default)
            self.info_topics.setdefault(view, info_default)
        extra = set(self.image_topics) - set(self.view_names)
        if extra:
            _fail("image_topics", self.image_topics, f"views {sorted(extra)} are not in view_names {self.view_names}")
        if self.image_transport not in IMAGE_TRANSPORTS:
            _fail("image_transport", self.image_transport, f"use one of {IMAGE_TRANSPORTS}")
        if not self.world_frame or not self.ee_frame:
            _fail("world_frame/ee_frame", (self.world_frame, self.ee_frame), "name both TF frames")
        try:  # the rules both paths share (camera_matrix, gripper_open_position), checked in one place
            self.observation_settings()
        except ValueError as err:
            raise ValueError(f"BagTopicConfig: {err}") from None
        if not float(self.pair_slop_s) >= 0:
            _fail("pair_slop_s", self.pair_slop_s, "use a stamp tolerance >= 0 seconds, e.g. 0.05")
        if not float(self.max_observation_age_s) > 0:
            _fail("max_observation_age_s", self.max_observation_age_s, "use a positive age in seconds, e.g. 1.0")

    def observation_settings(self, past_n: int = 0, step_dt_s: float = 0.1) -> ObservationSettings:
        """The observation rules of this configuration (the inference node builds the same from its parameters)."""
        return ObservationSettings(
            view_names=self.view_names,
            camera_matrix=self.camera_matrix,
            gripper_joint=self.gripper_joint,
            gripper_open_position=float(self.gripper_open_position),
            past_n=int(past_n),
            step_dt_s=float(step_dt_s),
        )

    @classmethod
    def from_inference_yaml(cls, path: str | os.PathLike | None = None, **overrides) -> BagTopicConfig:
        """The topics, frames and pairing parameters of an inference node parameter file (default
        ``config/inference.yaml``), so offline replay uses what the robot runs; ``overrides`` win."""

        path = Path(path) if path else config_file("inference.yaml")
        doc = yaml.safe_load(Path(path).read_text()) or {}
        params = next((v.get("ros__parameters", {}) for v in doc.values() if isinstance(v, dict)), {})
        kwargs = {}
        for name in (
            "world_frame",
            "ee_frame",
            "gripper_joint",
            "gripper_open_position",
            "pair_slop_s",
            "max_observation_age_s",
            "joint_states_topic",
            "camera_matrix",
        ):
            if name in params:
                kwargs[name] = params[name]
        if params.get("image_transport") in ("raw", "compressed"):
            kwargs["image_transport"] = "auto"  # a bag may hold either; auto prefers raw
        views = overrides.get("view_names", cls.view_names)
        kwargs["image_topics"] = {v: params[f"{v}_image_topic"] for v in views if f"{v}_image_topic" in params}
        kwargs["info_topics"] = {v: params[f"{v}_info_topic"] for v in views if f"{v}_info_topic" in params}
        kwargs.update(overrides)
        return cls(**kwargs)


BagObservation = Observation  # one observation type for live and recorded data (para_ros.observation.builder)


@dataclass
class BagStats:
    """What happened to the bag's frames (for reports and tests)."""

    frames_in: Counter = field(default_factory=Counter)  # view -> images read
    frames_paired: Counter = field(default_factory=Counter)  # view -> images used in an emitted pair
    pairs: int = 0  # pairs the pairing rule produced
    observations: int = 0  # pairs that became observations
    out_of_order_drops: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> pairs dropped after pairing
    first_problem: dict[str, str] = field(default_factory=dict)  # reason -> first message
    notes: Counter = field(default_factory=Counter)  # note key (distortion.<view>, gripper) -> observations with it
    first_note: dict[str, str] = field(default_factory=dict)  # note key -> its text

    def drop(self, reason: str, message: str) -> None:
        self.dropped[reason] += 1
        self.first_problem.setdefault(reason, message)

    def summary(self) -> str:
        parts = [f"{v}: {self.frames_in[v]} images, {self.frames_paired[v]} paired" for v in self.frames_in]
        text = "; ".join(parts) + f"; {self.pairs} pairs -> {self.observations} observations"
        if self.out_of_order_drops:
            text += f"; {self.out_of_order_drops} out-of-order images dropped"
        for reason, n in self.dropped.items():
            text += f"; {n} dropped ({reason}: {self.first_problem[reason]})"
        for key, n in self.notes.items():
            text += f"; {n} with a note ({key}: {self.first_note[key]})"
        return text


@dataclass
class _Pair:
    stamp_ns: int
    image_stamps_ns: tuple[int, ...]
    images: tuple  # rosbags image objects, one per view
    log_times_ns: tuple[int, ...]

    @property
    def gap_ns(self) -> int:
        """The pair's time difference: newest minus oldest image stamp, nanoseconds."""
        return max(self.image_stamps_ns) - min(self.image_stamps_ns)


# --------------------------------------------------------------------------------------------- rosbags -> rclpy
def transform_stamped_msg(t):
    """rclpy ``geometry_msgs/TransformStamped`` of a rosbags TransformStamped (what the tf Buffer takes)."""
    from geometry_msgs.msg import TransformStamped  # rclpy: loaded on first use, not on import

    msg = TransformStamped()
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(t.header.stamp.sec), int(t.header.stamp.nanosec)
    msg.header.frame_id = str(t.header.frame_id)
    msg.child_frame_id = str(t.child_frame_id)
    tr, q = t.transform.translation, t.transform.rotation
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (
        float(tr.x),
        float(tr.y),
        float(tr.z),
    )
    msg.transform.rotation.x, msg.transform.rotation.y, msg.transform.rotation.z, msg.transform.rotation.w = (
        float(q.x),
        float(q.y),
        float(q.z),
        float(q.w),
    )
    return msg


def image_msg(img):
    """rclpy ``sensor_msgs/Image`` or ``CompressedImage`` of a rosbags image object (data copied once)."""
    from sensor_msgs.msg import CompressedImage, Image  # rclpy: loaded on first use, not on import

    data = array.array("B", np.asarray(img.data, dtype=np.uint8).tobytes())
    if img.__msgtype__ == "sensor_msgs/msg/CompressedImage":
        msg = CompressedImage(format=str(img.format), data=data)
    else:
        msg = Image(
            height=int(img.height),
            width=int(img.width),
            encoding=str(img.encoding),
            is_bigendian=int(img.is_bigendian),
            step=int(img.step),
            data=data,
        )
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(img.header.stamp.sec), int(img.header.stamp.nanosec)
    msg.header.frame_id = str(img.header.frame_id)
    return msg


def decode_image(img) -> np.ndarray:
    """(H, W, 3) uint8 RGB of a rosbags ``Image`` / ``CompressedImage``, decoded exactly as the node decodes."""
    from para_ros.adapters.cv_bridge import image_msg_to_rgb  # rclpy: loaded on first use, not on import

    return image_msg_to_rgb(image_msg(img))


def make_typestore():
    """rosbags type store: ROS 2 Kilted types plus ``para_msgs/msg/ActionChunk``."""

    return _make()


# -------------------------------------------------------------------------------------------------- the reader
class BagReader:
    """Open a rosbag2 directory (or a single ``.mcap`` / ``.db3`` file's directory) and read observations.

    Use as a context manager::

        with BagReader("rosbag2_2025_01_01") as bag:
            for obs in bag.observations():
                ...

    Opening reads TF, CameraInfo and joint states into memory (small) and checks that every needed topic and TF
    frame exists; images are streamed.
    """

    def __init__(self, path: str | os.PathLike, config: BagTopicConfig | None = None, cameras: bool = True):
        """
        :param cameras: False: only TF and joint states are needed (e.g. to score chunks recorded in the bag).
        :raises BagError: unreadable or empty bag, missing topics, no TF for the world/EE/camera frames.
        """
        self.path = Path(path)
        self.config = config or BagTopicConfig()
        self._views = tuple(self.config.view_names) if cameras else ()
        self.stats = BagStats()
        self._typestore = make_typestore()
        self._reader = self._open(self.path)
        try:
            self._setup()
        except BaseException:
            self._reader.close()
            raise

    # -------------------------------------------------------------------------------------------- opening
    @staticmethod
    def _open(path: Path):
        from rosbags.rosbag2 import Reader  # rosbags: loaded on first use, not on import

        if not path.exists():
            raise BagError(f"bag {str(path)!r} does not exist; pass the rosbag2 directory (with metadata.yaml)")
        if path.is_file():
            if (path.parent / "metadata.yaml").is_file():
                path = path.parent  # a storage file inside a bag directory: open the directory
            else:
                raise BagError(
                    f"{str(path)!r} is a file without a metadata.yaml next to it; pass the rosbag2 "
                    "directory that `ros2 bag record` wrote (it holds metadata.yaml and the .mcap/.db3)"
                )
        reader = Reader(path)
        try:
            reader.open()
        except Exception as exc:  # rosbags raises several types (ReaderError, yaml, sqlite, mcap errors)
            raise BagError(
                f"cannot read bag {str(path)!r}: {type(exc).__name__}: {exc}. Is it a complete rosbag2 "
                "directory (metadata.yaml + .mcap or .db3)? A bag from a crashed recording may need "
                "`ros2 bag reindex`."
            ) from exc
        return reader

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> BagReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def topics(self) -> dict[str, str]:
        """Every topic of the bag -> its message type."""
        return {name: info.msgtype for name, info in self._reader.topics.items()}

    def _topics_text(self) -> str:
        counts = {name: info.msgcount for name, info in self._reader.topics.items()}
        return (
            ", ".join(f"{name} ({msgtype}, {counts[name]} msgs)" for name, msgtype in sorted(self.topics.items()))
            or "no topics"
        )

    def _connections(self, topic: str) -> list:
        return [c for c in self._reader.connections if c.topic == topic]

    def _require(self, topic: str, types: Sequence[str], what: str) -> list:
        conns = self._connections(topic)
        if not conns:
            raise BagError(
                f"bag {str(self.path)!r} has no topic {topic!r} ({what}). The bag has: "
                f"{self._topics_text()}. Pass the right topic (see --help) or record it."
            )
        bad = [c.msgtype for c in conns if c.msgtype not in types]
        if bad:
            raise BagError(f"topic {topic!r} ({what}) has type {bad[0]}; expected one of {list(types)}")
        if sum(c.msgcount for c in conns) == 0:
            raise BagError(f"topic {topic!r} ({what}) has no messages in bag {str(self.path)!r}")
        return conns

    def messages(self, topic: str, msgtype: str | None = None) -> Iterator[tuple[int, object]]:
        """(log time ns, deserialized rosbags message) of one topic, in log-time order.

        :raises BagError: the topic is missing (listing what the bag has) or has another type than ``msgtype``.
        """
        conns = self._require(
            topic, (msgtype,) if msgtype else tuple({c.msgtype for c in self._connections(topic)}), "requested"
        )
        for _, log_ns, msg in self._messages(conns):
            yield log_ns, msg

    def _messages(self, connections) -> Iterator[tuple[object, int, object]]:
        """(connection, log time ns, deserialized rosbags message) in log-time order."""
        for conn, log_ns, raw in self._reader.messages(connections=connections):
            yield conn, log_ns, self._typestore.deserialize_cdr(raw, conn.msgtype)

    def _setup(self) -> None:
        cfg = self.config
        if self._reader.message_count == 0:
            raise BagError(f"bag {str(self.path)!r} is empty (0 messages; topics: {self._topics_text()})")
        # Image topics (raw or compressed).
        self.image_topics: dict[str, str] = {}
        for view in self._views:
            base = cfg.image_topics[view]
            candidates = {"raw": [base], "compressed": [base + "/compressed"], "auto": [base, base + "/compressed"]}[
                cfg.image_transport
            ]
            found = next((t for t in candidates if self._connections(t)), None)
            if found is None:
                raise BagError(
                    f"bag {str(self.path)!r} has no {view} camera images on "
                    f"{' or '.join(repr(t) for t in candidates)} (image_transport={cfg.image_transport}). "
                    f"The bag has: {self._topics_text()}. Set the {view} image topic (see --help)."
                )
            self._require(found, IMAGE_TYPES, f"{view} camera images")
            self.image_topics[view] = found
        info_conns = {
            view: self._require(cfg.info_topics[view], (CAMERA_INFO_TYPE,), f"{view} CameraInfo")
            for view in self._views
        }
        tf_conns = self._connections(cfg.tf_topic) + self._connections(cfg.tf_static_topic)
        if not tf_conns:
            raise BagError(
                f"bag {str(self.path)!r} has neither {cfg.tf_topic!r} nor {cfg.tf_static_topic!r}: "
                f"camera and end-effector poses come from TF. The bag has: {self._topics_text()}"
            )
        for c in tf_conns:
            if c.msgtype != TF_TYPE:
                raise BagError(f"topic {c.topic!r} has type {c.msgtype}; expected {TF_TYPE}")
        js_conns = self._connections(cfg.joint_states_topic) if cfg.joint_states_topic else []

        # Small data into memory, in one pass: TF, CameraInfo, joint states.
        from rclpy.duration import Duration  # rclpy: loaded on first use, not on import

        from para_ros.adapters.tf import Buffer  # rclpy: loaded on first use, not on import

        span_s = max(self._reader.duration / 1e9, 0.0)
        self.tf_buffer = Buffer(cache_time=Duration(seconds=span_s + 3600.0))
        self.tf_stamp_range_ns: list[int] = []
        self._infos: dict[str, tuple[list[int], list]] = {v: ([], []) for v in self._views}
        info_topic_to_view = {cfg.info_topics[v]: v for v in self._views}
        settings = self.config.observation_settings()
        self.gripper_history = GripperHistory(on_time_back="insert")  # log order may differ slightly from stamps
        self.tf_rejections = 0
        for conn, log_ns, msg in self._messages(tf_conns + [c for cs in info_conns.values() for c in cs] + js_conns):
            if conn.topic in (cfg.tf_topic, cfg.tf_static_topic):
                static = conn.topic == cfg.tf_static_topic
                for t in msg.transforms:
                    ros_t = transform_stamped_msg(t)
                    ok = (
                        self.tf_buffer.set_transform_static(ros_t, "rosbag")
                        if static
                        else self.tf_buffer.set_transform(ros_t, "rosbag")
                    )
                    if ok is False:
                        self.tf_rejections += 1
                    if not static:
                        self.tf_stamp_range_ns.append(stamp_to_ns(t.header.stamp))
            elif conn.topic in info_topic_to_view:
                stamps, infos = self._infos[info_topic_to_view[conn.topic]]
                stamps.append(log_ns)
                infos.append(msg)
            else:
                value = gripper_opening(msg.name, msg.position, settings)
                if value is not None:
                    self.gripper_history.add(stamp_to_ns(msg.header.stamp) or log_ns, value)
        if self.tf_stamp_range_ns:
            self.tf_stamp_range_ns = [min(self.tf_stamp_range_ns), max(self.tf_stamp_range_ns)]
        self.has_gripper = len(self.gripper_history) > 0

        # Frames: world <- EE and world <- each camera must be connected somewhere in the bag.
        self.camera_frames: dict[str, str] = {}
        for view in self._views:
            info = self._infos[view][1][0]
            self.camera_frames[view] = str(info.header.frame_id)
        self._check_frame(cfg.ee_frame, "end-effector (ee_frame)")
        for view, frame in self.camera_frames.items():
            if not frame:
                continue  # checked per image (the image's frame id is used then)
            self._check_frame(frame, f"{view} camera (CameraInfo frame_id)")

    def known_frames(self) -> list[str]:
        text = self.tf_buffer.all_frames_as_string()
        frames = set()
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 6 and words[0] == "Frame":
                frames.add(words[1])
                frames.add(words[-1].rstrip("."))
        return sorted(frames)

    def _check_frame(self, frame: str, what: str) -> None:
        from rclpy.time import Time  # rclpy: loaded on first use, not on import

        world = self.config.world_frame
        ok, why = self.tf_buffer.can_transform(world, frame, Time(), return_debug_tuple=True)
        if not ok:
            rejected = getattr(self.tf_buffer, "rejections_by_child", {})
            detail = f" Refused transforms: {rejected}." if rejected else ""
            raise BagError(
                f"no TF from {world!r} to the {what} frame {frame!r} in bag {str(self.path)!r} "
                f"({why}). Frames in the bag's TF: {self.known_frames()}.{detail} Set the frame names "
                f"(--world-frame, --ee-frame) or record {self.config.tf_topic} and "
                f"{self.config.tf_static_topic}."
            )

    # ------------------------------------------------------------------------------------------- look-ups
    def lookup(self, frame: str, stamp_ns: int) -> np.ndarray:
        """``T_world_frame`` (4, 4) at ``stamp_ns`` (interpolated by the tf Buffer).

        :raises LookupError: no TF at that time (before/after the recorded data, unknown frame); says which.
        """
        from rclpy.time import Time  # rclpy: loaded on first use, not on import

        from para_ros.adapters.tf import TransformException  # rclpy: loaded on first use, not on import

        try:
            return self.tf_buffer.lookup_matrix(self.config.world_frame, frame, Time(nanoseconds=int(stamp_ns)))
        except TransformException as exc:
            raise LookupError(
                f"no TF {self.config.world_frame} <- {frame} at t={stamp_ns / 1e9:.6f} s ({type(exc).__name__}: {exc})"
            ) from None

    def try_lookup(self, frame: str, stamp_ns: int) -> np.ndarray | None:
        try:
            return self.lookup(frame, stamp_ns)
        except LookupError:
            return None

    def ee_pose_at(self, stamp_ns: int) -> np.ndarray:
        """End-effector pose ``T_world_ee`` (4, 4) at ``stamp_ns``. :raises LookupError:"""
        return self.lookup(self.config.ee_frame, stamp_ns)

    def gripper_at(self, stamp_ns: int) -> float | None:
        """Gripper opening (0 closed .. 1 open) at ``stamp_ns``: newest joint state at or before it (sample and
        hold), the first one before the first; None when the bag has no gripper joint."""
        return self.gripper_history.at(stamp_ns)

    def past_positions(self, stamp_ns: int, n: int, step_dt_s: float, current_xyz: np.ndarray) -> np.ndarray:
        """(n, 3) EE positions at ``stamp - k * step_dt_s`` for k = n..1 (oldest first); times without TF take the
        oldest known one (the current position if none): the inference node's rule."""

        def ee_xyz_at(t_ns: int):
            T = self.try_lookup(self.config.ee_frame, t_ns)
            return None if T is None else T[:3, 3]

        return past_positions(ee_xyz_at, stamp_ns, n, step_dt_s, current_xyz)

    def _camera_info_for(self, view: str, log_ns: int):
        stamps, infos = self._infos[view]
        i = bisect.bisect_right(stamps, log_ns) - 1
        return infos[max(i, 0)]

    # ------------------------------------------------------------------------------------------- pairing
    def pairs(self) -> Iterator[_Pair]:
        """Image pairs by the node's pairing rules (see module docstring), images not decoded yet."""

        cfg = self.config
        views = cfg.view_names
        topic_to_view = {self.image_topics[v]: v for v in views}
        pairer = ObservationPairer(
            views, slop_ns=int(round(cfg.pair_slop_s * 1e9)), max_age_ns=int(round(cfg.max_observation_age_s * 1e9))
        )
        conns = [c for v in views for c in self._connections(self.image_topics[v])]
        now_ns = None
        for conn, log_ns, msg in self._messages(conns):
            view = topic_to_view[conn.topic]
            stamp_ns = stamp_to_ns(msg.header.stamp) or log_ns
            self.stats.frames_in[view] += 1
            now_ns = stamp_ns if now_ns is None else max(now_ns, stamp_ns)
            if pairer.add(view, stamp_ns, (msg, log_ns), now_ns=None) is not None:
                self.stats.out_of_order_drops += 1
                continue
            pair = pairer.newest_pair(now_ns)
            if pair.frames is None:
                continue
            pairer.mark_used(pair)
            self.stats.pairs += 1
            for v in views:
                self.stats.frames_paired[v] += 1
            yield _Pair(
                stamp_ns=pair.stamp_ns,
                image_stamps_ns=tuple(f.stamp_ns for f in pair.frames),
                images=tuple(f.message[0] for f in pair.frames),
                log_times_ns=tuple(f.message[1] for f in pair.frames),
            )

    def pair_stamps(self) -> list[int]:
        """Observation stamps of all pairs (a cheap first pass: no decoding, no TF)."""
        stats, self.stats = self.stats, BagStats()
        try:
            return [p.stamp_ns for p in self.pairs()]
        finally:
            self.stats = stats

    # ------------------------------------------------------------------------------------------ observations
    def observation(self, pair: _Pair, past_n: int = 0, step_dt_s: float = 0.1) -> Observation:
        """Decode a pair and look its poses up by the shared builder (:mod:`para_ros.observation.builder`), with
        ``past_n`` past positions ``step_dt_s`` apart. :raises ObservationProblem: on a bad frame or missing TF."""

        def lookup(frame: str, stamp_ns: int, wait: bool = True) -> np.ndarray:
            try:
                return self.lookup(frame, stamp_ns)
            except LookupError as exc:
                raise ObservationProblem("tf", str(exc)) from None

        def ee_pose(stamp_ns: int, wait: bool = True) -> np.ndarray:
            try:
                return self.ee_pose_at(stamp_ns)
            except LookupError as exc:
                raise ObservationProblem("tf", f"end-effector pose: {exc}") from None

        cfg = self.config
        infos = [self._camera_info_for(view, log_ns) for view, log_ns in zip(cfg.view_names, pair.log_times_ns)]
        return build_observation(
            cfg.observation_settings(past_n, step_dt_s),
            pair.stamp_ns,
            [(image_msg(img), stamp) for img, stamp in zip(pair.images, pair.image_stamps_ns)],
            infos,
            lookup,
            ee_pose,
            self.gripper_at(pair.stamp_ns),
            info_sources=[cfg.info_topics[v] for v in cfg.view_names],
            gripper_source=cfg.joint_states_topic or "the bag",
        )

    def observations(
        self, stamps_ns: set[int] | None = None, past_n: int = 0, step_dt_s: float = 0.1
    ) -> Iterator[Observation]:
        """Synchronised observations in time order; ``stamps_ns``: only the pairs with these observation stamps;
        ``past_n`` / ``step_dt_s``: the policy's EE history (its ``mv_past_n`` and chunk step).

        Observations that cannot be built are dropped and counted in :attr:`stats` (``stats.summary()``); their
        notes (distortion ignored, no gripper) are counted there too.
        """
        for pair in self.pairs():
            if stamps_ns is not None and pair.stamp_ns not in stamps_ns:
                continue
            try:
                obs = self.observation(pair, past_n, step_dt_s)
            except ObservationProblem as drop:
                self.stats.drop(drop.key, str(drop))
                continue
            self.stats.observations += 1
            for key, text in obs.notes.items():
                self.stats.notes[key] += 1
                self.stats.first_note.setdefault(key, text)
            yield obs


def select_by_fps(stamps_ns: Sequence[int], fps: float | None) -> list[int]:
    """Decimate observation stamps to a target rate: the stamps closest to the grid ``t0 + k / fps``.

    For every grid time (from the first stamp on) the nearest stamp within half a period is kept; each stamp is used at
    most once and grid times with no stamp that close are skipped (a gap, e.g. when the source rate is lower than
    ``fps``). The kept stamps are the real observation stamps (images are never interpolated). ``fps`` None or <= 0:
    keep every stamp.
    """
    stamps = np.asarray(sorted(set(int(s) for s in stamps_ns)), dtype=np.int64)
    if fps is None or fps <= 0 or stamps.size == 0:
        return stamps.tolist()
    period_ns = 1e9 / float(fps)
    n_grid = int(np.floor((stamps[-1] - stamps[0]) / period_ns + 0.5)) + 1
    kept: list[int] = []
    for k in range(n_grid):
        t = stamps[0] + k * period_ns
        i = int(np.searchsorted(stamps, t))
        best = None
        for j in (i - 1, i):
            if 0 <= j < stamps.size and abs(stamps[j] - t) <= period_ns / 2:
                if best is None or abs(stamps[j] - t) < abs(stamps[best] - t):
                    best = j
        if best is not None and (not kept or stamps[best] > kept[-1]):
            kept.append(int(stamps[best]))
    return kept
