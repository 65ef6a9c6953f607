"""Synthetic rosbag2 recordings with known ground truth (written with ``rosbags``, no ROS), for the bag tests.

The recording looks like the YAM rig: a static scene camera (``/tf_static`` base -> scene_cam_optical_frame), a wrist
camera riding on the gripper (``/tf``: base -> gripper at ``tf_rate_hz``, gripper -> grasp_site and gripper ->
wrist_cam_optical_frame constant), RGB images (scene raw ``rgb8``, wrist ``CompressedImage`` jpeg by default),
CameraInfo, and ``/joint_states`` with the gripper. Every quantity is an analytic function of time, and the TF
samples are exactly the functions at their stamps, so tests can compute the truth independently (scipy Slerp).

Image i of a camera is a flat colour whose red channel is ``(7 * i) % 256``: a test can tell which frame was used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from para_core.data.synthetic import intrinsics_from_fovy, scene_camera_pose, top_down_rotation, wrist_camera_pose

T0_NS = 1_700_000_000_000_000_000  # a realistic wall-clock epoch
NS = 1_000_000_000


@dataclass
class SyntheticBagSpec:
    duration_s: float = 2.0
    tf_rate_hz: float = 100.0
    camera_rate_hz: float = 10.0
    wrist_delay_s: float = 0.003  # wrist frame k is stamped this long after scene frame k
    log_latency_s: float = 0.005  # receive (log) time = stamp + this
    joint_rate_hz: float = 50.0
    image_wh: tuple[int, int] = (48, 36)
    wrist_compressed: bool = True
    storage: str = "mcap"  # mcap | sqlite3
    missing_scene_frames: tuple[int, ...] = ()  # scene frame indices not recorded
    out_of_order_after_wrist: tuple[int, ...] = ()  # after wrist frame k, an extra wrist frame stamped 50 ms earlier
    scene_jitter_s: dict[int, float] = field(default_factory=dict)  # scene frame k stamped this much later
    skip_topics: tuple[str, ...] = ()
    ee_frame: str = "grasp_site"
    wrist_distortion: tuple[float, ...] = (0.0,) * 5  # the wrist CameraInfo's d (plumb_bob)


# ------------------------------------------------------------------------------------------------ ground truth
def T_world_gripper(t_s):
    """(..., 4, 4) gripper pose at time(s) t_s (seconds since the start): a circle in x/y, rising, yawing."""
    t = np.atleast_1d(np.asarray(t_s, dtype=np.float64))
    T = np.tile(np.eye(4), (t.size, 1, 1))
    T[:, 0, 3] = 0.3 + 0.08 * np.cos(1.5 * t)
    T[:, 1, 3] = 0.08 * np.sin(1.5 * t)
    T[:, 2, 3] = 0.22 + 0.03 * t
    T[:, :3, :3] = top_down_rotation() @ Rotation.from_rotvec(np.outer(0.3 * t, [0.0, 0.0, 1.0])).as_matrix()
    return T if np.ndim(t_s) else T[0]


T_GRIPPER_GRASP = np.eye(4)
T_GRIPPER_GRASP[:3, 3] = [0.0, 0.0, 0.09]  # tool point 9 cm along the gripper's z (down in world when top-down)


def T_gripper_wristcam() -> np.ndarray:
    ee0 = T_world_gripper(0.0)
    return np.linalg.inv(ee0) @ wrist_camera_pose(ee_pos=ee0[:3, 3] + np.array([0, 0, -0.09]))


def T_SCENE() -> np.ndarray:
    return scene_camera_pose()


def K_IMAGE(spec: SyntheticBagSpec) -> np.ndarray:
    """Intrinsics of the images in the para_core pixel-centre convention (the CameraInfo holds the ROS one)."""
    w, h = spec.image_wh
    return intrinsics_from_fovy(w, h, 70.0)


def tf_stamps_ns(spec: SyntheticBagSpec) -> np.ndarray:
    n = int(round(spec.duration_s * spec.tf_rate_hz)) + 1
    return T0_NS + np.round(np.arange(n) * NS / spec.tf_rate_hz).astype(np.int64)


def reference_gripper_pose(spec: SyntheticBagSpec, stamp_ns):
    """T_world_gripper at ``stamp_ns`` as tf2 defines it: linear translation and slerp between the TF samples."""
    stamps = tf_stamps_ns(spec)
    samples = T_world_gripper((stamps - T0_NS) / 1e9)
    t = (np.atleast_1d(np.asarray(stamp_ns, dtype=np.int64)) - T0_NS) / 1e9
    ts = (stamps - T0_NS) / 1e9
    out = np.tile(np.eye(4), (t.size, 1, 1))
    for k in range(3):
        out[:, k, 3] = np.interp(t, ts, samples[:, k, 3])
    out[:, :3, :3] = Slerp(ts, Rotation.from_matrix(samples[:, :3, :3]))(t).as_matrix()
    return out if np.ndim(stamp_ns) else out[0]


def reference_ee_pose(spec, stamp_ns):
    return reference_gripper_pose(spec, stamp_ns) @ T_GRIPPER_GRASP


def reference_wrist_pose(spec, stamp_ns):
    return reference_gripper_pose(spec, stamp_ns) @ T_gripper_wristcam()


def gripper_samples(spec: SyntheticBagSpec) -> tuple[np.ndarray, np.ndarray]:
    """(stamps_ns, opening): open until 0.8 s, closing linearly until 1.2 s, then closed."""
    n = int(round(spec.duration_s * spec.joint_rate_hz)) + 1
    stamps = T0_NS + np.round(np.arange(n) * NS / spec.joint_rate_hz).astype(np.int64)
    t = (stamps - T0_NS) / 1e9
    return stamps, np.clip(1.0 - (t - 0.8) / 0.4, 0.0, 1.0)


def reference_gripper(spec, stamp_ns) -> float:
    stamps, values = gripper_samples(spec)
    i = int(np.searchsorted(stamps, int(stamp_ns), side="right")) - 1
    return float(values[max(i, 0)])


def camera_stamps_ns(spec: SyntheticBagSpec) -> tuple[dict[int, int], dict[int, int]]:
    """Scene and wrist image stamps by frame index (missing frames left out; extra out-of-order frames not listed)."""
    n = int(np.floor(spec.duration_s * spec.camera_rate_hz + 1e-9)) + 1
    period = NS / spec.camera_rate_hz
    scene = {
        k: T0_NS + int(round(k * period + spec.scene_jitter_s.get(k, 0.0) * NS))
        for k in range(n)
        if k not in spec.missing_scene_frames
    }
    wrist = {k: T0_NS + int(round(k * period + spec.wrist_delay_s * NS)) for k in range(n)}
    return scene, wrist


def frame_colour(i: int) -> tuple[int, int, int]:
    return ((7 * i) % 256, 90, 160)


# ------------------------------------------------------------------------------------------------------ writer
def write_synthetic_bag(path: str | Path, spec: SyntheticBagSpec | None = None, chunks=(), voxels=()) -> Path:
    """Write the recording to the rosbag2 directory ``path`` and return it.

    :param chunks: ``(stamp_ns, positions (T, 3), quaternions_xyzw (T, 4), offsets_ns (T,), gripper (T,))`` tuples
        recorded as ``para_msgs/ActionChunk`` on ``/para/action_chunk`` (as a live run records them).
    :param voxels: ``(stamp_ns, points (N, 3), probability (N,))`` tuples recorded as the inference node's
        ``/para/voxels`` PointCloud2 (float32 x, y, z, probability).
    """
    from rosbags.rosbag2 import StoragePlugin, Writer

    from para_ros.bag.recording import make_typestore

    spec = spec or SyntheticBagSpec()
    path = Path(path)
    store = make_typestore()
    ty = store.types
    Time, Header = ty["builtin_interfaces/msg/Time"], ty["std_msgs/msg/Header"]
    Vec, Quat = ty["geometry_msgs/msg/Vector3"], ty["geometry_msgs/msg/Quaternion"]
    Tf, TfS, TFMessage = (
        ty["geometry_msgs/msg/Transform"],
        ty["geometry_msgs/msg/TransformStamped"],
        ty["tf2_msgs/msg/TFMessage"],
    )
    Image, CImage, Info, Joint = (
        ty["sensor_msgs/msg/Image"],
        ty["sensor_msgs/msg/CompressedImage"],
        ty["sensor_msgs/msg/CameraInfo"],
        ty["sensor_msgs/msg/JointState"],
    )
    ROI = ty["sensor_msgs/msg/RegionOfInterest"]

    def header(stamp_ns, frame=""):
        sec, nsec = divmod(int(stamp_ns), NS)
        return Header(stamp=Time(sec=sec, nanosec=nsec), frame_id=frame)

    def tfs(stamp_ns, parent, child, T):
        q = Rotation.from_matrix(T[:3, :3]).as_quat()  # x, y, z, w
        return TfS(
            header=header(stamp_ns, parent),
            child_frame_id=child,
            transform=Tf(
                translation=Vec(x=T[0, 3], y=T[1, 3], z=T[2, 3]), rotation=Quat(x=q[0], y=q[1], z=q[2], w=q[3])
            ),
        )

    w, h = spec.image_wh
    K = K_IMAGE(spec)

    # CameraInfo carries the ROS/OpenCV convention (pixel centres at integers): cx, cy half a pixel lower than the
    # para_core K (pixel centres at +0.5, docs/contracts.md) that K_IMAGE returns.
    K_ros = K.copy()
    K_ros[0, 2] -= 0.5
    K_ros[1, 2] -= 0.5

    def info(stamp_ns, frame, d=(0.0,) * 5):
        P = np.zeros((3, 4))
        P[:, :3] = K_ros
        return Info(
            header=header(stamp_ns, frame),
            height=h,
            width=w,
            distortion_model="plumb_bob",
            d=np.asarray(d, dtype=np.float64),
            k=K_ros.ravel(),
            r=np.eye(3).ravel(),
            p=P.ravel(),
            binning_x=0,
            binning_y=0,
            roi=ROI(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False),
        )

    events: list[tuple[int, str, object]] = []  # (log ns, topic, message)
    lat = int(round(spec.log_latency_s * NS))
    stamps = tf_stamps_ns(spec)
    T_gw = T_gripper_wristcam()
    for s in (int(v) for v in stamps):
        T = T_world_gripper((s - T0_NS) / 1e9)
        events.append(
            (
                s + lat,
                "/tf",
                TFMessage(
                    transforms=[
                        tfs(s, "base", "gripper", T),
                        tfs(s, "gripper", spec.ee_frame, T_GRIPPER_GRASP),
                        tfs(s, "gripper", "wrist_cam_optical_frame", T_gw),
                    ]
                ),
            )
        )
    events.append(
        (T0_NS, "/tf_static", TFMessage(transforms=[tfs(T0_NS, "base", "scene_cam_optical_frame", T_SCENE())]))
    )
    for s, g in zip(*gripper_samples(spec)):
        s, g = int(s), float(g)
        events.append(
            (
                s + lat,
                "/joint_states",
                Joint(
                    header=header(s),
                    name=["joint1", "gripper"],
                    position=np.array([0.1, g]),
                    velocity=np.zeros(0),
                    effort=np.zeros(0),
                ),
            )
        )
    scene, wrist = camera_stamps_ns(spec)
    for k, s in scene.items():
        img = np.empty((h, w, 3), np.uint8)
        img[:] = frame_colour(k)
        events.append(
            (
                s + lat,
                "/scene_cam/image_raw",
                Image(
                    header=header(s, "scene_cam_optical_frame"),
                    height=h,
                    width=w,
                    encoding="rgb8",
                    is_bigendian=0,
                    step=3 * w,
                    data=img.ravel(),
                ),
            )
        )
        events.append((s + lat, "/scene_cam/camera_info", info(s, "scene_cam_optical_frame")))

    def wrist_msg(k, s):
        img = np.empty((h, w, 3), np.uint8)
        img[:] = frame_colour(k)
        hd = header(s, "wrist_cam_optical_frame")
        if spec.wrist_compressed:
            ok, buf = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 95])
            return "/wrist_cam/image_raw/compressed", CImage(
                header=hd, format="rgb8; jpeg compressed bgr8", data=buf.ravel()
            )
        return "/wrist_cam/image_raw", Image(
            header=hd, height=h, width=w, encoding="rgb8", is_bigendian=0, step=3 * w, data=img.ravel()
        )

    for k, s in wrist.items():
        topic, msg = wrist_msg(k, s)
        events.append((s + lat, topic, msg))
        events.append((s + lat, "/wrist_cam/camera_info", info(s, "wrist_cam_optical_frame", spec.wrist_distortion)))
        if k in spec.out_of_order_after_wrist:
            late = s - int(0.05 * NS)
            topic, msg = wrist_msg(200 + k, late)
            events.append((s + lat + 1000, topic, msg))

    Chunk, Pose, Point, Duration = (
        ty["para_msgs/msg/ActionChunk"],
        ty["geometry_msgs/msg/Pose"],
        ty["geometry_msgs/msg/Point"],
        ty["builtin_interfaces/msg/Duration"],
    )
    for stamp, pos, quat, offsets_ns, grip in chunks:
        poses = [
            Pose(
                position=Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                orientation=Quat(x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3])),
            )
            for p, q in zip(pos, quat)
        ]
        durations = [Duration(sec=int(o) // NS, nanosec=int(o) % NS) for o in offsets_ns]
        events.append(
            (
                int(stamp) + lat,
                "/para/action_chunk",
                Chunk(
                    header=header(stamp, "base"),
                    tool_frame_id=spec.ee_frame,
                    time_from_stamp=durations,
                    poses=poses,
                    gripper=np.asarray(grip, dtype=np.float32),
                    confidence=np.ones(len(poses), np.float32),
                    entropy=np.zeros(0, np.float32),  # the other confidence measures: none recorded
                    chunk_agreement=np.zeros(0, np.float32),
                    view_agreement=np.zeros(0, np.float32),
                    model_id="recorded-test",
                ),
            )
        )

    Cloud, Field = ty["sensor_msgs/msg/PointCloud2"], ty["sensor_msgs/msg/PointField"]
    for stamp, pts, prob in voxels:
        data = np.empty(len(pts), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("probability", "<f4")])
        data["x"], data["y"], data["z"] = np.asarray(pts, dtype=np.float32).T
        data["probability"] = prob
        fields = [
            Field(name=n, offset=4 * i, datatype=7, count=1)  # 7: FLOAT32
            for i, n in enumerate(("x", "y", "z", "probability"))
        ]
        events.append(
            (
                int(stamp) + lat,
                "/para/voxels",
                Cloud(
                    header=header(stamp, "base"),
                    height=1,
                    width=len(data),
                    fields=fields,
                    is_bigendian=False,
                    point_step=16,
                    row_step=16 * len(data),
                    data=np.frombuffer(data.tobytes(), np.uint8),
                    is_dense=True,
                ),
            )
        )

    events = [e for e in events if e[1] not in spec.skip_topics]
    events.sort(key=lambda e: e[0])
    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[spec.storage]
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        conns = {}
        for log_ns, topic, msg in events:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=store)
            writer.write(conns[topic], int(log_ns), store.serialize_cdr(msg, msg.__msgtype__))
    return path
