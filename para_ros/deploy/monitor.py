"""The launcher's own small node: watches the deploy graph for the summary, the snapshot and the recording.

Runs in the launcher's process on its own rclpy context and thread (no signal handlers: the launcher owns Ctrl-C).
Every topic it records is subscribed ``raw`` (CDR bytes as DDS delivered them) and written to the bag unchanged;
only what the summary needs is deserialized. The scene camera's pose for the snapshot comes from TF at the image
stamp (the project's ``tf2_ros`` adapter), its intrinsics from the CameraInfo of that camera.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from para_ros.deploy.summary import RunRecord
from para_ros.observation.camera_model import intrinsics_from_camera_info
from para_ros.paths import effective_params
from para_ros.ros_io.spin import spin_until
from para_ros.stamps import stamp_to_ns

NODE_NAME = "para_deploy_monitor"
RECENT = 60  # scene images / chunks / markers kept for the snapshot (6 s at 10 Hz)


@dataclass(frozen=True)
class GraphTopics:
    """The topics of a deploy graph that the monitor watches and records (the nodes' effective parameters)."""

    scene_image: str = "/scene_cam/image_raw"
    scene_info: str = "/scene_cam/camera_info"
    wrist_image: str = "/wrist_cam/image_raw"
    wrist_info: str = "/wrist_cam/camera_info"
    joint_trajectory: str = "/joint_trajectory"
    world_frame: str = "base"

    def sensor_topics(self) -> set[str]:
        """Topics of drivers that are often best effort (cameras, joint states, TF)."""
        return {self.scene_image, self.scene_info, self.wrist_image, self.wrist_info, "/joint_states", "/tf"}


def graph_topics(plan):
    """The ``GraphTopics`` the monitor watches, from the effective parameters of the planned nodes (``graph.plan``)."""
    specs = {spec.name: (spec, overrides) for spec, overrides in plan}
    inference = effective_params(specs["inference_node"][0].params_file, "inference_node", specs["inference_node"][1])
    executor = (
        effective_params(specs["chunk_executor"][0].params_file, "chunk_executor", specs["chunk_executor"][1])
        if "chunk_executor" in specs
        else {}
    )
    default = GraphTopics()
    return GraphTopics(
        scene_image=inference.get("scene_image_topic", default.scene_image),
        scene_info=inference.get("scene_info_topic", default.scene_info),
        wrist_image=inference.get("wrist_image_topic", default.wrist_image),
        wrist_info=inference.get("wrist_info_topic", default.wrist_info),
        joint_trajectory=executor.get("joint_trajectory_topic", default.joint_trajectory),
        world_frame=inference.get("world_frame", default.world_frame),
    )


def record_topics(topics: GraphTopics) -> dict[str, type]:
    """Topic -> message class of everything recorded (rosbag2 MCAP): both cameras, so ``para-bag extract`` and
    ``para-bag eval`` can replay the recording through a policy."""
    from diagnostic_msgs.msg import DiagnosticArray  # rclpy: loaded on first use, not on import
    from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2
    from tf2_msgs.msg import TFMessage
    from trajectory_msgs.msg import JointTrajectory
    from visualization_msgs.msg import MarkerArray

    from para_msgs.msg import ActionChunk

    return {
        topics.scene_image: Image,
        topics.scene_info: CameraInfo,
        topics.wrist_image: Image,
        topics.wrist_info: CameraInfo,
        "/tf": TFMessage,
        "/tf_static": TFMessage,
        "/joint_states": JointState,
        "/para/action_chunk": ActionChunk,
        "/para/markers": MarkerArray,
        "/para/voxels": PointCloud2,
        topics.joint_trajectory: JointTrajectory,
        "/diagnostics": DiagnosticArray,
    }


def _stamp_ns(header) -> int:
    return stamp_to_ns(header.stamp)


class DeployMonitor:
    """Subscribe, record and collect; :meth:`stop` ends it, :meth:`record` and :meth:`save_snapshot` report."""

    def __init__(self, recorder=None, image_period_s: float = 0.5, topics: GraphTopics = GraphTopics()):
        """:param recorder: a :class:`para_ros.bag.recording.McapRecorder` (or None: no recording).
        :param topics: the graph's topics (camera topics, the executor's trajectory topic, the world frame).
        :param image_period_s: record camera images (and their CameraInfo) at most once per this period, by image
            STAMP: the first frame of each period window of every camera is kept, so cameras triggered together
            (the simulator) keep the same stamps and the recording still pairs. 0 records every frame (images
            dominate the bag size).
        """
        import rclpy  # rclpy: loaded on first use, not on import
        from rclpy.duration import Duration
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions

        from para_ros.adapters.tf import Buffer, TransformListener  # rclpy: loaded on first use, not on import

        if not image_period_s >= 0:
            raise ValueError(f"image_period_s={image_period_s}: must be >= 0 (0 records every image)")
        self.recorder = recorder
        self.image_period_ns = int(round(image_period_s * 1e9))
        self._kept_window: dict[str, int] = {}  # camera topic -> stamp window of its last recorded image
        self._kept_stamps: dict[str, deque] = {}  # camera topic -> stamps of recorded images (for CameraInfo)
        self.scene_image_topic = topics.scene_image
        self.scene_info_topic = topics.scene_info
        self.trajectory_topic = topics.joint_trajectory
        self.world_frame = topics.world_frame
        self.context = rclpy.Context()
        # args=[]: the command's own argv (e.g. --node-param NODE:NAME:=VALUE) is not ROS arguments
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(NODE_NAME, context=self.context)
        self._lock = threading.Lock()
        self.data = RunRecord()
        self._scene_images: deque = deque(maxlen=RECENT)  # (stamp_ns, raw bytes)
        self._chunks: deque = deque(maxlen=RECENT)  # ActionChunk messages
        self._markers: dict[int, object] = {}
        self._clouds: dict[int, bytes] = {}
        self._camera_info = None
        self.tf_buffer = Buffer(cache_time=Duration(seconds=30.0), node=self.node)
        self.tf_listener = TransformListener(self.tf_buffer, self.node)

        self.topics = record_topics(topics)
        self._info_of_image = {topics.scene_info: topics.scene_image, topics.wrist_info: topics.wrist_image}
        handlers = {
            topics.scene_image: self._on_scene_image,
            topics.scene_info: self._on_camera_info,
            topics.wrist_image: lambda data, recv_ns: self._keep_image(topics.wrist_image, data),
            topics.wrist_info: lambda data, recv_ns: self._keep_info(topics.wrist_info, data),
            "/joint_states": self._on_joint_states,
            "/para/action_chunk": self._on_chunk,
            "/para/markers": self._on_markers,
            "/para/voxels": self._on_cloud,
            topics.joint_trajectory: self._on_command,
            "/diagnostics": self._on_diagnostics,
        }
        sensor_topics = topics.sensor_topics()
        for topic, msg_class in self.topics.items():
            if topic == "/tf_static":
                qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            elif topic in sensor_topics:
                # best effort matches reliable AND best-effort publishers (camera and joint-state drivers often are)
                qos = QoSProfile(depth=200, reliability=ReliabilityPolicy.BEST_EFFORT)
            else:  # the graph's own topics: reliable, so the recording has every chunk and command
                qos = QoSProfile(depth=200)
            handler = handlers.get(topic)
            self.node.create_subscription(
                msg_class, topic, lambda data, t=topic, h=handler: self._on_raw(t, h, data), qos, raw=True
            )
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=NODE_NAME, daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------------------------------------- spin
    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException  # rclpy: loaded on first use, not on import

        try:
            spin_until(self.executor, lambda: not self.context.ok(), period_s=0.1)
        except (ExternalShutdownException, KeyboardInterrupt):
            pass
        except Exception as exc:  # noqa: BLE001  (a monitor problem must not take the launcher down)
            if self.context.ok():
                print(f"para-deploy monitor: {exc!r}", flush=True)

    def stop(self) -> None:
        """Stop receiving (the recording stays open until the caller closes it)."""
        if self.context.ok():
            self.context.try_shutdown()
        self._thread.join(timeout=5.0)
        try:
            self.executor.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------------------------------------ callbacks
    def _on_raw(self, topic: str, handler, data: bytes) -> None:
        recv_ns = time.time_ns()
        record = True
        try:
            if handler is not None:
                record = handler(data, recv_ns) is not False
        except Exception as exc:  # noqa: BLE001  (a bad message is skipped, never fatal)
            self.node.get_logger().warning(f"{topic}: {exc!r}", throttle_duration_sec=5.0)
        if record and self.recorder is not None:
            self.recorder.write(topic, recv_ns, data)

    def _deserialize(self, data: bytes, topic: str):
        from rclpy.serialization import deserialize_message  # rclpy: loaded on first use, not on import

        return deserialize_message(data, self.topics[topic])

    def _keep_image(self, topic: str, data: bytes, stamp_ns: int | None = None) -> bool:
        """Whether to record this camera image: the first of its stamp window (see ``image_period_s``)."""
        if stamp_ns is None:
            stamp_ns = _stamp_ns(self._deserialize(data, topic).header)
        window = stamp_ns // self.image_period_ns if self.image_period_ns else stamp_ns
        with self._lock:
            if window == self._kept_window.get(topic):
                return False
            self._kept_window[topic] = window
            self._kept_stamps.setdefault(topic, deque(maxlen=50)).append(stamp_ns)
            return True

    def _keep_info(self, topic: str, data: bytes) -> bool:
        """Record a CameraInfo when its image was recorded (same stamp), and always the first one."""
        stamp_ns = _stamp_ns(self._deserialize(data, topic).header)
        image_topic = self._info_of_image[topic]
        with self._lock:
            first = topic not in self._kept_window
            self._kept_window.setdefault(topic, -1)
            return first or stamp_ns in self._kept_stamps.get(image_topic, ())

    def _on_scene_image(self, data: bytes, recv_ns: int) -> bool:
        msg = self._deserialize(data, self.scene_image_topic)
        with self._lock:
            self.data.scene_frame_recv_ns.append(recv_ns)
            self._scene_images.append((_stamp_ns(msg.header), data))
        return self._keep_image(self.scene_image_topic, data, _stamp_ns(msg.header))

    def _on_camera_info(self, data: bytes, recv_ns: int) -> bool:
        with self._lock:
            self._camera_info = data
        return self._keep_info(self.scene_info_topic, data)

    def _on_joint_states(self, data: bytes, recv_ns: int) -> None:
        msg = self._deserialize(data, "/joint_states")
        positions = {n: float(p) for n, p in zip(msg.name, msg.position)}
        with self._lock:
            if not self.data.joint_positions_first:
                self.data.joint_positions_first = positions
            self.data.joint_positions_last = positions
            self.data.joint_state_count += 1

    def _on_chunk(self, data: bytes, recv_ns: int) -> None:
        msg = self._deserialize(data, "/para/action_chunk")
        with self._lock:
            self.data.chunk_stamp_ns.append(_stamp_ns(msg.header))
            self.data.chunk_recv_ns.append(recv_ns)
            self.data.model_id = msg.model_id
            self._chunks.append(msg)

    def _on_markers(self, data: bytes, recv_ns: int) -> None:
        msg = self._deserialize(data, "/para/markers")
        if msg.markers:
            with self._lock:
                self._markers[_stamp_ns(msg.markers[0].header)] = msg
                while len(self._markers) > RECENT:
                    self._markers.pop(next(iter(self._markers)))

    def _on_cloud(self, data: bytes, recv_ns: int) -> None:
        msg = self._deserialize(data, "/para/voxels")
        with self._lock:
            self._clouds[_stamp_ns(msg.header)] = data
            while len(self._clouds) > RECENT:
                self._clouds.pop(next(iter(self._clouds)))

    def _on_command(self, data: bytes, recv_ns: int) -> None:
        msg = self._deserialize(data, self.trajectory_topic)
        with self._lock:
            self.data.command_recv_ns.append(recv_ns)
            self.data.command_stamp_ns.append(_stamp_ns(msg.header))

    def _on_diagnostics(self, data: bytes, recv_ns: int) -> None:
        msg = self._deserialize(data, "/diagnostics")
        with self._lock:
            for status in msg.status:
                self.data.diagnostics[status.name] = {kv.key: kv.value for kv in status.values}

    # ---------------------------------------------------------------------------------------------- output
    def record(self) -> RunRecord:
        """A copy of what was collected so far."""

        with self._lock:
            return copy.deepcopy(self.data)

    def counts(self) -> tuple[int, int, int]:
        """(scene images, chunks, commands) seen so far."""
        with self._lock:
            return (len(self.data.scene_frame_recv_ns), len(self.data.chunk_stamp_ns), len(self.data.command_recv_ns))

    def snapshot_scene(self, lines=()):
        """The newest chunk with its scene image, as a :class:`para_ros.deploy.snapshot.SnapshotScene` (None if none yet).

        The image is the scene frame whose stamp is nearest the chunk's observation stamp (the frame the chunk was
        predicted from); the camera pose is looked up in TF at that frame's stamp.
        """
        from rclpy.serialization import deserialize_message  # rclpy: loaded on first use, not on import
        from rclpy.time import Time
        from sensor_msgs.msg import CameraInfo, PointCloud2

        from para_ros.adapters.cv_bridge import image_msg_to_rgb  # cv2, rclpy: loaded on first use, not on import
        from para_ros.deploy.snapshot import SnapshotScene  # cv2: loaded on first use, not on import

        # rclpy: loaded on first use, not on import
        from para_ros.ros_io.rviz import MARKER_NS_EE, MARKER_NS_STEPS, cloud_to_array

        with self._lock:
            chunks = list(self._chunks)
            images = list(self._scene_images)
            markers = dict(self._markers)
            clouds = dict(self._clouds)
            info_raw = self._camera_info
        if not chunks or not images or info_raw is None:
            return None
        image_stamps = np.array([s for s, _ in images], dtype=np.int64)
        for chunk in reversed(chunks):
            stamp = _stamp_ns(chunk.header)
            i = int(np.argmin(np.abs(image_stamps - stamp)))
            if abs(int(image_stamps[i]) - stamp) <= 100_000_000:
                break
        else:
            return None
        image = self._deserialize(images[i][1], self.scene_image_topic)
        info = deserialize_message(info_raw, CameraInfo)
        rgb = image_msg_to_rgb(image)

        K = intrinsics_from_camera_info(info, rgb.shape[1], rgb.shape[0])  # para_core convention, as snapshot.py
        frame = info.header.frame_id or image.header.frame_id
        T_world_cam = self.tf_buffer.lookup_matrix(
            chunk.header.frame_id or self.world_frame, frame, Time(nanoseconds=int(image_stamps[i]))
        )  # (4, 4)
        path = np.array([[p.position.x, p.position.y, p.position.z] for p in chunk.poses])  # (T, 3)
        ee, voxel_size = None, 0.01
        marker_msg = markers.get(stamp)
        if marker_msg is not None:
            for m in marker_msg.markers:
                if m.ns == MARKER_NS_EE:
                    ee = np.array([m.pose.position.x, m.pose.position.y, m.pose.position.z])
                elif m.ns == MARKER_NS_STEPS:
                    voxel_size = float(m.scale.x)
        voxels = prob = None
        if stamp in clouds:
            cloud = cloud_to_array(deserialize_message(clouds[stamp], PointCloud2))  # (M, 4)
            voxels, prob = cloud[:, :3].astype(np.float64), cloud[:, 3].astype(np.float64)
        return SnapshotScene(
            image_rgb=rgb,
            K=K,
            T_world_cam=T_world_cam,
            path_world=path,
            ee_world=ee,
            voxel_size_m=voxel_size,
            voxels_world=voxels,
            voxels_prob=prob,
            lines=list(lines),
        )

    def save_snapshot(self, path: str | Path, lines=()) -> Path | None:
        """Draw the newest chunk into its scene image and write it to ``path`` (PNG); None when not possible yet."""
        import cv2  # cv2: loaded on first use, not on import

        from para_ros.deploy.snapshot import draw_snapshot  # cv2: loaded on first use, not on import

        scene = self.snapshot_scene(lines)
        if scene is None:
            return None
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(path), draw_snapshot(scene))
        return path
