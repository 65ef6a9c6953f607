"""``para-calib capture``: drive the arm through calibration poses and record, at each settled pose, what a solve needs.

What is recorded (rosbag2, MCAP, with :class:`para_ros.bag.recording.McapRecorder`, as the CDR bytes DDS delivered):
both cameras' ``image_raw`` + ``camera_info``, ``/tf``, ``/tf_static`` (latched, written at the start) and
``/joint_states``: TF and joint states all along, images and CameraInfo in a short window per pose: from the moment
the arm has settled (every joint's measured position moved less than ``settle_tol_rad`` over ``settle_s``) until each
camera has delivered an image (and its CameraInfo) stamped after it. The bag is thus about one sample per camera per
pose (two when a camera delivers twice in the window), readable by ``para-calib solve`` and
``para_ros.bag.reader.BagReader``.

Where the commands go: the robot's command backend, looked up in :mod:`para_ros.nodes.command_backends` as the
deploy graph's executor gets it: ``sim`` (``JointTrajectory`` with the gripper to the simulated arm,
``sim_node``), ``topic`` (``JointTrajectory`` of the 6 arm joints to a ros2_control controller) or ``i2rt`` (the I2RT
SDK on CAN; capture then owns the bus, so it also writes ``/joint_states`` and the arm's ``/tf`` into the bag from the
joints it reads, like the executor would publish them).

Safety: the poses come from :mod:`para_ros.calibration.capture_poses` (IK, joint range with a margin, workspace box
along the path); every command on the way is a minimum-jerk joint-space step slowed to ``speed_fraction`` of
``config/yam.yaml``'s joint and tool speed limits and checked by :func:`para_ros.execution.safety.check_command`
before it is sent (a failing check holds the arm and ends the capture). Ctrl-C, a pose that does not settle, or a
camera that does not deliver within ``sample_timeout_s`` hold the arm at once (a command to where it is measured).
"""

from __future__ import annotations

import math
import select
import shutil
import signal
import struct
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.detection import MIN_CORNERS, detect_charuco
from para_ros.bag.recording import McapRecorder
from para_ros.calibration.capture_poses import plan_capture_poses
from para_ros.dds_env import apply_loopback_dds_env
from para_ros.execution.executor_core import JointCommand
from para_ros.execution.safety import check_command
from para_ros.nodes.command_backends import ROBOTS, BackendContext, command_backend, robot
from para_ros.robot.yam import load_yam_config
from para_ros.robot.yam_frames import YamFrames
from para_ros.robot.yam_ik import YamKinematics
from para_ros.ros_io.spin import spin_until
from para_ros.sim.calibration_board import FLANGE_BOARD_CENTRE_M
from para_ros.stamps import ns_to_fields

CAMERAS = ("scene_cam", "wrist_cam")


class CaptureAborted(RuntimeError):
    """The capture stopped (the arm was held): the message says why and what to do."""


@dataclass
class CaptureSettings:
    """What ``para-calib capture`` is told (see ``--help``)."""

    out: Path
    camera: str = "scene_cam"
    robot: str = "sim"  # para_ros.nodes.command_backends.ROBOTS: its command backend moves the arm
    poses: int = 12
    angle_deg: float = 25.0
    offset_m: float = 0.03
    centre: str = ""
    pivot_m: tuple | None = None
    control_rate_hz: float = 50.0
    speed_fraction: float = 0.3
    settle_s: float = 0.4
    settle_tol_rad: float = 0.002
    sample_timeout_s: float = 15.0
    scene_ns: str = "/scene_cam"
    wrist_ns: str = "/wrist_cam"
    joint_states_topic: str = "/joint_states"
    joint_trajectory_topic: str = "/joint_trajectory"
    arm_joint_names: tuple = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6")
    can_channel: str = "can0"
    force: bool = False
    zero_gravity: bool = False  # robot i2rt: let the arm be moved by hand (--manual)
    board: CharucoBoardSpec = field(default_factory=CharucoBoardSpec)  # the board each sample is checked for
    backend: str = ""  # deprecated name of ``robot`` (--backend): accepted with a warning, empty once resolved

    def __post_init__(self):
        if self.camera not in CAMERAS:
            raise ValueError(f"--camera {self.camera!r}: use one of {', '.join(CAMERAS)}")
        if self.backend:
            if self.robot not in ("sim", self.backend):
                raise ValueError(f"--robot {self.robot} and --backend {self.backend}: give --robot only")
            warnings.warn("--backend is deprecated for the robot: use --robot", FutureWarning, stacklevel=3)
            self.robot, self.backend = self.backend, ""
        if self.robot not in ROBOTS:
            raise ValueError(f"--robot {self.robot!r}: use one of {', '.join(ROBOTS)}")
        if not 0.0 < self.speed_fraction <= 1.0:
            raise ValueError(f"--speed-fraction {self.speed_fraction}: give a fraction in (0, 1] of the speed limits")
        if not 1.0 <= self.control_rate_hz <= 500.0:
            raise ValueError(f"--control-rate {self.control_rate_hz}: give 1..500 Hz")
        for name in ("settle_s", "settle_tol_rad", "sample_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: give a positive number")

    def recorded_topics(self) -> dict[str, str]:
        out = {}
        for ns in (self.scene_ns, self.wrist_ns):
            ns = ns.rstrip("/")
            out[f"{ns}/image_raw"] = "sensor_msgs/msg/Image"
            out[f"{ns}/camera_info"] = "sensor_msgs/msg/CameraInfo"
        out.update(
            {
                "/tf": "tf2_msgs/msg/TFMessage",
                "/tf_static": "tf2_msgs/msg/TFMessage",
                self.joint_states_topic: "sensor_msgs/msg/JointState",
            }
        )
        return out


def default_pivot_in_flange(camera: str, yam) -> np.ndarray:
    """(3,) pivot of the rotations in the flange frame: for the scene camera the simulator's flange board centre
    (:data:`para_ros.sim.calibration_board.FLANGE_BOARD_CENTRE_M`); for the wrist camera the point 0.25 m along its
    optical axis at ``config/yam.yaml``'s mount."""
    if camera == "scene_cam":
        return np.asarray(FLANGE_BOARD_CENTRE_M, dtype=np.float64)
    return (yam.wrist_camera.T_parent_camera() @ np.array([0.0, 0.0, 0.25, 1.0]))[:3]


def sim_centre_q() -> np.ndarray:
    """(n,) the simulator's start pose (its arm joints): its flange board faces the default scene camera, the wrist camera sees the
    table board."""
    from para_ros.sim.yam_scene import DEFAULT_HOME_Q7  # mujoco: loaded on first use, not on import

    return np.asarray(DEFAULT_HOME_Q7[: load_yam_config().n_joints], dtype=np.float64)


def parse_centre(text: str) -> np.ndarray | None:
    """``--centre``: "" / "current" (None: the arm's measured joints), "sim", or one comma-separated angle per arm
    joint (rad; the YAM description's joint count)."""
    text = (text or "").strip()
    if text in ("", "current"):
        return None
    if text == "sim":
        return sim_centre_q()
    try:
        q = np.array([float(v) for v in text.split(",")])
    except ValueError:
        q = np.zeros(0)
    n = load_yam_config().n_joints
    if q.shape != (n,) or not np.all(np.isfinite(q)):
        raise ValueError(f"--centre {text!r}: give current, sim, or {n} comma-separated joint angles in radians")
    return q


def make_plan(settings: CaptureSettings, centre_q: np.ndarray, yam=None, kinematics=None):
    """The :class:`para_ros.calibration.capture_poses.CapturePlan` for ``settings`` around ``centre_q``."""
    yam = yam or load_yam_config()
    m = yam.model
    kinematics = kinematics or YamKinematics(m.arm_type, m.gripper_type, m.tool_site, max_iters=200)
    frames = YamFrames(yam.wrist_camera, m.arm_type, m.gripper_type, m.tool_site)
    T_flange_tool = next(
        T
        for parent, child, T in frames.transforms(np.zeros(yam.n_joints))
        if parent == "gripper" and child == m.tool_site
    )
    pivot = (
        np.asarray(settings.pivot_m, dtype=np.float64)
        if settings.pivot_m is not None
        else default_pivot_in_flange(settings.camera, yam)
    )
    return plan_capture_poses(
        centre_q,
        pivot,
        yam,
        kinematics,
        T_flange_tool,
        n=settings.poses,
        angle_deg=settings.angle_deg,
        offset_m=settings.offset_m,
    )


def min_jerk(s: float) -> float:
    s = min(max(s, 0.0), 1.0)
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


def move_duration_s(q_from: np.ndarray, q_to: np.ndarray, limits, kinematics, speed_fraction: float) -> float:
    """Duration of a minimum-jerk joint move that keeps every joint and the tool under ``speed_fraction`` of the
    limits (the minimum-jerk peak speed is 1.875 times the mean)."""
    dq = np.abs(np.asarray(q_to) - np.asarray(q_from))
    t_joint = float(np.max(1.875 * dq / (speed_fraction * np.asarray(limits.max_joint_speed_rad_s))))
    n = 50
    path = np.array([kinematics.fk_position(q_from + (q_to - q_from) * s) for s in np.linspace(0, 1, n + 1)])
    rate = float(np.max(np.linalg.norm(np.diff(path, axis=0), axis=1))) * n  # largest d(tool)/d(path fraction), m
    t_tool = 1.1 * 1.875 * rate / (speed_fraction * limits.max_ee_speed_m_s)  # 10 % for the sampling of the path
    return max(0.5, t_joint, t_tool)


class CaptureSession:
    """An rclpy node that records the topics and a command backend; used by :func:`run_capture`."""

    def __init__(self, settings: CaptureSettings):
        import rclpy  # rclpy: loaded on first use, not on import (para-calib board and solve stay ROS-free)
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from sensor_msgs.msg import CameraInfo, Image, JointState
        from tf2_msgs.msg import TFMessage

        apply_loopback_dds_env()
        self.settings = s = settings
        if not rclpy.ok():
            # No rclpy signal handlers: Ctrl-C must reach this code as KeyboardInterrupt (the arm is then held), and
            # SIGTERM is turned into the same (rclpy's handler would only shut the context down, silently).
            from rclpy.signals import SignalHandlerOptions  # rclpy: as above

            rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)  # our argv is not ROS arguments
            _sigterm_as_interrupt()
        self.rclpy = rclpy
        self.node = n = Node("para_calib_capture")
        self.lock = threading.Lock()
        self.recording = False
        self.recorder = None
        self.static_raw: list[bytes] = []
        self.last_image_ns: dict[str, int] = {}  # topic -> header stamp of the latest image recorded
        self.last_info_ns: dict[str, int] = {}
        self.last_image_raw: dict[str, bytes] = {}  # topic -> CDR bytes of the latest image recorded in a sample
        self.samples_taken = 0
        types = {
            "sensor_msgs/msg/Image": Image,
            "sensor_msgs/msg/CameraInfo": CameraInfo,
            "tf2_msgs/msg/TFMessage": TFMessage,
            "sensor_msgs/msg/JointState": JointState,
        }
        self.topics = s.recorded_topics()
        # The arm's state is recorded all along once the bag is open (a sample's flange pose is interpolated at its
        # image stamp, and the reader checks the arm was still around it); images only in the sample windows.
        self.continuous = {"/tf", s.joint_states_topic}
        self.backend_spec = command_backend(robot(s.robot).command_backend)
        # a backend that reads the arm directly: capture owns the arm, it writes /joint_states and /tf itself
        self.own_state = self.backend_spec.reads_arm_directly
        for topic, type_name in self.topics.items():
            if self.own_state and topic in ("/tf", s.joint_states_topic):
                continue
            qos = QoSProfile(depth=50)
            if topic == "/tf_static":
                qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            n.create_subscription(types[type_name], topic, lambda data, t=topic: self._on_raw(t, data), qos, raw=True)
        self.backend = self._make_backend()
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(n)
        self._running = True
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _make_backend(self):
        """The robot's command backend from the registry, told this capture's topics and CAN channel."""
        s = self.settings
        yam = load_yam_config()
        if self.own_state:  # capture publishes the arm's TF itself
            self.frames = YamFrames(yam.wrist_camera, yam.model.arm_type, yam.model.gripper_type, yam.model.tool_site)
        given = {
            **robot(s.robot).executor_parameters,
            "joint_trajectory_topic": s.joint_trajectory_topic,
            "sdk_channel": s.can_channel,
            "sdk_zero_gravity_mode": s.zero_gravity,
            "gripper_command_topic": "",  # capture moves the arm only; the gripper stays where it is
        }
        spec = self.backend_spec
        params = spec.values({k: v for k, v in given.items() if k in {p.name for p in spec.parameters}})
        context = BackendContext(self.node, yam, tuple(s.arm_joint_names), s.joint_states_topic, yam.model.world_frame)
        return spec.build(context, params)

    def alive(self) -> bool:
        """The node still spins (topics are read); the SDK backend reads without it."""
        return self.own_state or (self._running and self._thread.is_alive() and self.rclpy.ok())

    def _spin(self):
        spin_until(self.executor, lambda: not self._running, period_s=0.02, on_error="continue")

    def _on_raw(self, topic: str, data: bytes) -> None:
        with self.lock:
            if topic == "/tf_static":
                self.static_raw.append(bytes(data))
            if self.recorder is not None and (self.recording or topic in self.continuous):
                self.recorder.write(topic, time.time_ns(), data)
                if self.recording and topic.endswith("/image_raw") or topic.endswith("/camera_info"):
                    stamp_ns = _header_stamp_ns(topic, data)
                    (self.last_image_ns if topic.endswith("/image_raw") else self.last_info_ns)[topic] = stamp_ns
                    if topic.endswith("/image_raw"):
                        self.last_image_raw[topic] = bytes(data)

    def calibrated_camera_image(self) -> np.ndarray | None:
        """(H, W, 3) RGB of the latest recorded image of the camera being calibrated, or None (none yet)."""
        from rclpy.serialization import deserialize_message  # rclpy: loaded on first use, not on import
        from sensor_msgs.msg import Image

        from para_ros.adapters.cv_bridge import image_msg_to_rgb  # sensor_msgs: as above

        s = self.settings
        ns = s.scene_ns if s.camera == "scene_cam" else s.wrist_ns
        with self.lock:
            raw = self.last_image_raw.get(f"{ns.rstrip('/')}/image_raw")
        return None if raw is None else image_msg_to_rgb(deserialize_message(raw, Image))

    def open_bag(self, path: Path) -> None:
        with self.lock:
            self.recorder = McapRecorder(path, self.topics)
            for raw in self.static_raw:
                self.recorder.write("/tf_static", time.time_ns(), raw)

    def write_own_state(self, q6: np.ndarray, gripper: float) -> None:
        """Backend i2rt: /joint_states and the arm's /tf from the joints read, stamped now."""
        from geometry_msgs.msg import TransformStamped  # rclpy: loaded on first use, not on import
        from rclpy.serialization import serialize_message
        from sensor_msgs.msg import JointState
        from tf2_msgs.msg import TFMessage

        from para_ros.adapters.transforms import matrix_to_transform

        now = time.time_ns()
        sec, nsec = ns_to_fields(now)
        js = JointState()
        js.header.stamp.sec, js.header.stamp.nanosec = sec, nsec
        js.name = list(self.settings.arm_joint_names) + ["gripper"]
        js.position = [float(v) for v in q6] + [float(gripper) if np.isfinite(gripper) else 0.0]
        js.velocity = [0.0] * 7  # unknown; filled because rosbags refuses rclpy's CDR of empty trailing sequences
        js.effort = [0.0] * 7
        tf = TFMessage()
        for parent, child, T in self.frames.transforms(q6):
            t = TransformStamped()
            t.header.stamp.sec, t.header.stamp.nanosec = sec, nsec
            t.header.frame_id, t.child_frame_id = parent, child
            t.transform = matrix_to_transform(T)
            tf.transforms.append(t)
        with self.lock:
            if self.recorder is not None:
                self.recorder.write(self.settings.joint_states_topic, now, serialize_message(js))
                self.recorder.write("/tf", now, serialize_message(tf))

    def close(self) -> None:
        with self.lock:
            self.recording = False
            rec, self.recorder = self.recorder, None
        if rec is not None:
            rec.close()
        self._running = False
        self._thread.join(timeout=2.0)
        self.backend.close()
        self.node.destroy_node()
        self.rclpy.try_shutdown()


def _sigterm_as_interrupt() -> None:
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def _header_stamp_ns(topic: str, data: bytes) -> int:
    """Header stamp of a CDR Image / CameraInfo (std_msgs/Header first: 4-byte encapsulation, sec, nanosec)."""
    sec, nsec = struct.unpack_from("<iI", bytes(data), 4)
    return sec * 1_000_000_000 + nsec


class ArmMover:
    """Safe joint-space moves through a command backend (see the module docstring)."""

    def __init__(self, session: CaptureSession, yam, kinematics, settings: CaptureSettings):
        self.session, self.yam, self.kin, self.settings = session, yam, kinematics, settings
        self.period_s = 1.0 / settings.control_rate_hz
        self.q_cmd: np.ndarray | None = None
        self.g_cmd = float("nan")

    def measured(self, timeout_s: float = 5.0) -> tuple[np.ndarray, float]:
        deadline = time.monotonic() + timeout_s
        if not self.session.alive():
            raise CaptureAborted("the ROS node stopped (its context was shut down); nothing more is read or sent")
        while True:
            state = self.session.backend.read_joints()
            if state is not None:
                if self.session.own_state:
                    self.session.write_own_state(*state)
                return state
            if time.monotonic() > deadline:
                raise CaptureAborted(
                    f"no joint state within {timeout_s:.0f} s from {self.session.backend.describe()}: "
                    f"is the arm (or sim_node) running and publishing "
                    f"{self.settings.joint_states_topic}?"
                )
            time.sleep(0.02)

    def _send(self, q: np.ndarray, g: float, moving: bool) -> None:
        if self.q_cmd is not None:
            problems = check_command(
                self.yam.limits,
                q,
                g if np.isfinite(g) else 0.0,
                self.q_cmd,
                self.g_cmd if np.isfinite(self.g_cmd) else (g if np.isfinite(g) else 0.0),
                self.period_s,
                self.kin.fk_position,
            )
            if problems:
                self.hold()
                raise CaptureAborted(
                    "a command broke the limits of config/yam.yaml, the arm is held: " + "; ".join(problems)
                )
        cmd = JointCommand(
            stamp_s=time.monotonic(),
            time_from_start_s=self.period_s,
            q_rad=np.asarray(q, float),
            gripper=float(g),
            T_base_tool=self.kin.fk(q),
            moving=moving,
        )
        self.session.backend.send(cmd)
        self.q_cmd, self.g_cmd = np.asarray(q, float).copy(), float(g)

    def hold(self) -> None:
        """Command the measured joints: the arm stops where it is."""
        state = self.session.backend.read_joints()
        if state is None:
            return
        q, g = state
        g = g if np.isfinite(g) else self.g_cmd
        self.session.backend.send(
            JointCommand(time.monotonic(), self.period_s, np.asarray(q, float), float(g), self.kin.fk(q), False)
        )
        self.q_cmd, self.g_cmd = np.asarray(q, float).copy(), float(g)

    def move_to(self, q_target: np.ndarray) -> None:
        q0, g0 = self.measured()
        if self.q_cmd is None:
            self.q_cmd, self.g_cmd = q0.copy(), g0
        lim = self.yam.limits
        if np.any(q_target < np.asarray(lim.joint_lower_rad)) or np.any(q_target > np.asarray(lim.joint_upper_rad)):
            raise CaptureAborted(
                f"target joints {np.round(q_target, 3).tolist()} are outside config/yam.yaml's "
                "joint range; nothing was sent"
            )
        start = self.q_cmd.copy()
        duration = move_duration_s(start, q_target, lim, self.kin, self.settings.speed_fraction)
        # The schedule advances one control period per command, not with the wall clock: a late tick slows the move
        # down instead of making the next step longer (each step stays within the speed limits at period_s).
        n_steps = max(1, math.ceil(duration / self.period_s))
        t_next = time.monotonic()
        for k in range(1, n_steps + 1):
            s = min_jerk(k / n_steps)
            self._send(start + (q_target - start) * s, self.g_cmd, moving=k < n_steps)
            if self.session.own_state:
                self.session.write_own_state(*self.measured())
            t_next += self.period_s
            time.sleep(max(0.0, t_next - time.monotonic()))

    def wait_settled(self, timeout_s: float) -> np.ndarray:
        """Block until the measured joints moved less than ``settle_tol_rad`` over ``settle_s``; returns them."""
        s = self.settings
        history: list[tuple[float, np.ndarray]] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            q, _ = self.measured()
            now = time.monotonic()
            history.append((now, q))
            history = [(t, v) for t, v in history if now - t <= s.settle_s + 0.2]
            old = [v for t, v in history if now - t >= s.settle_s]
            if (
                old
                and max(float(np.max(np.abs(v - q))) for t, v in history if now - t <= s.settle_s) < s.settle_tol_rad
            ):
                return q
            time.sleep(0.02)
        self.hold()
        raise CaptureAborted(
            f"the arm did not settle within {timeout_s:.0f} s (joints still moving more than "
            f"{s.settle_tol_rad} rad over {s.settle_s} s); it is held. Check the controller, or raise "
            "--sample-timeout / --settle-tol"
        )


def take_sample(session: CaptureSession, mover: ArmMover, timeout_s: float) -> None:
    """Record from now until every camera delivered an image and CameraInfo stamped after now."""
    s = session.settings
    start_ns = time.time_ns()
    images = [f"{ns.rstrip('/')}/image_raw" for ns in (s.scene_ns, s.wrist_ns)]
    infos = [f"{ns.rstrip('/')}/camera_info" for ns in (s.scene_ns, s.wrist_ns)]
    with session.lock:
        session.last_image_ns.clear()
        session.last_info_ns.clear()
        session.last_image_raw.clear()
        session.recording = True
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if session.own_state:
                session.write_own_state(*mover.measured())
            with session.lock:
                done = all(session.last_image_ns.get(t, 0) >= start_ns - 5_000_000 for t in images) and all(
                    t in session.last_info_ns for t in infos
                )
            if done:
                time.sleep(0.05)  # the TF / joint states just after the last image, for interpolation
                session.samples_taken += 1
                return
            if time.monotonic() > deadline:
                missing = [t for t in images if session.last_image_ns.get(t, 0) < start_ns - 5_000_000]
                missing += [t for t in infos if t not in session.last_info_ns]
                mover.hold()
                raise CaptureAborted(
                    f"no fresh message on {', '.join(missing)} within {timeout_s:.0f} s; the arm is "
                    "held. Are the camera drivers running (for a sim: stamps use the wall clock, "
                    "publish_clock: false)?"
                )
            time.sleep(0.02)
    finally:
        with session.lock:
            session.recording = False


MIN_CAPTURE_POSES = 3


def require_enough_poses(plan) -> None:
    """Refuse a plan with fewer than :data:`MIN_CAPTURE_POSES` reachable poses, naming the options that help."""
    if len(plan.poses) < MIN_CAPTURE_POSES:
        raise CaptureAborted(
            f"only {len(plan.poses)} poses are reachable within the limits; move the arm so the "
            "camera sees the board with room to turn (--centre), or lower --angle-deg / --offset-m"
        )


class BoardTally:
    """Which samples show the board: each sample's image of the calibrated camera is checked with the detector
    ``para-calib solve`` uses (at least :data:`para_core.calibration.detection.MIN_CORNERS` ChArUco corners), so a
    capture with the board out of view says so at once instead of recording poses the solve cannot use."""

    def __init__(self, camera: str, board: CharucoBoardSpec):
        self.camera, self.board = camera, board
        self.with_board: list[int] = []
        self.without_board: list[int] = []

    def add(self, sample_no: int, image_rgb: np.ndarray | None) -> str | None:
        """Count sample ``sample_no``; a warning line when its image shows no board (or no image came), else None."""
        detection = None if image_rgb is None else detect_charuco(image_rgb, self.board)
        if detection is not None:
            self.with_board.append(sample_no)
            return None
        self.without_board.append(sample_no)
        what = "no image" if image_rgb is None else f"fewer than {MIN_CORNERS} board corners"
        return (
            f"  warning: sample {sample_no}: {what} in the {self.camera} image; para-calib solve cannot use it "
            f"({len(self.without_board)} sample(s) without the board so far)"
        )

    def summary(self) -> str:
        n = len(self.with_board) + len(self.without_board)
        text = f"{len(self.with_board)} of {n} samples show the board ({self.board.squares_x}x{self.board.squares_y} "
        text += f"{self.board.dictionary}) in the {self.camera} image"
        if self.without_board:
            text += f"; without it: samples {self.without_board}"
        if not self.with_board:
            text += (
                ". warning: none can be solved: put the board in the camera's view (--centre, the board options) "
                "and capture again"
            )
        return text


def run_capture(
    settings: CaptureSettings,
    dry_run: bool = False,
    manual: bool = False,
    manual_samples: int = 20,
    still_s: float = 1.0,
    log=print,
) -> int:
    """Run ``para-calib capture``; returns the number of samples recorded (poses listed on a dry run)."""
    out = Path(settings.out)
    yam = load_yam_config()
    kin = YamKinematics(yam.model.arm_type, yam.model.gripper_type, yam.model.tool_site, max_iters=200)
    centre = parse_centre(settings.centre) if settings.centre else (sim_centre_q() if settings.robot == "sim" else None)
    if dry_run and not manual and centre is not None:
        plan = make_plan(settings, centre, yam, kin)
        log(
            f"para-calib capture --dry-run ({settings.camera}, centre joints {np.round(centre, 3).tolist()}): "
            + plan.describe()
        )
        return len(plan.poses)
    if out.exists() and not dry_run:
        if not settings.force:
            raise CaptureAborted(f"{out} exists: choose another --out or pass --force to replace it")
        shutil.rmtree(out)
    session = CaptureSession(settings)
    mover = ArmMover(session, yam, kin, settings)
    n = 0
    try:
        q_now, _ = mover.measured(timeout_s=10.0)
        if centre is None:
            centre = q_now
        if manual:
            return _run_manual(session, mover, out, manual_samples, still_s, log)
        plan = make_plan(settings, centre, yam, kin)
        log(f"para-calib capture ({settings.camera}, {settings.robot}): " + plan.describe())
        if dry_run:
            return len(plan.poses)
        require_enough_poses(plan)
        time.sleep(1.0)  # /tf_static (latched) arrives
        session.open_bag(out)
        log(f"moving to the centre pose, then {len(plan.poses)} poses")
        mover.move_to(centre)
        tally = BoardTally(settings.camera, settings.board)
        for _k, pose in enumerate(plan.poses):
            mover.move_to(pose.q_rad)
            q = mover.wait_settled(settings.sample_timeout_s)
            take_sample(session, mover, settings.sample_timeout_s)
            n += 1
            log(
                f"  sample {n}/{len(plan.poses)} at pose {pose.index} (joints off target by "
                f"{float(np.max(np.abs(q - pose.q_rad))):.4f} rad)"
            )
            warning = tally.add(n, session.calibrated_camera_image())
            if warning:
                log(warning)
        mover.move_to(centre)
        log(tally.summary())
        return n
    except KeyboardInterrupt:
        mover.hold()
        log(f"para-calib capture: interrupted, the arm is held; {session.samples_taken} samples kept in {out}")
        raise
    except CaptureAborted:
        mover.hold()
        raise
    finally:
        session.close()


def _run_manual(session: CaptureSession, mover: ArmMover, out: Path, max_samples: int, still_s: float, log) -> int:
    """Record while the user moves the arm: a sample on Enter, or when the arm was still for ``still_s`` after it
    moved by more than 0.05 rad since the last sample. Ends after ``max_samples`` or on 'q' + Enter / Ctrl-C."""
    time.sleep(1.0)
    session.open_bag(out)
    log(
        f"para-calib capture --manual: move the arm (by hand or teleoperation); a sample is taken on Enter or after "
        f"{still_s:.1f} s still; q + Enter ends. Recording into {out}"
    )
    n = 0
    tally = BoardTally(mover.settings.camera, mover.settings.board)
    q_last_sample = None
    still_since, q_still = time.monotonic(), mover.measured()[0]
    interactive = sys.stdin is not None and sys.stdin.isatty()
    while n < max_samples:
        key = None
        if interactive and select.select([sys.stdin], [], [], 0.05)[0]:
            key = sys.stdin.readline().strip().lower()
            if key == "q":
                break
        else:
            time.sleep(0.05)
        q, _ = mover.measured()
        if float(np.max(np.abs(q - q_still))) > mover.settings.settle_tol_rad:
            still_since, q_still = time.monotonic(), q
        moved = q_last_sample is None or float(np.max(np.abs(q - q_last_sample))) > 0.05
        still = time.monotonic() - still_since >= still_s
        if key is not None or (still and moved):
            take_sample(session, mover, mover.settings.sample_timeout_s)
            q_last_sample = q
            n += 1
            log(f"  sample {n} ({'key' if key is not None else 'still'}) at joints {np.round(q, 3).tolist()}")
            warning = tally.add(n, session.calibrated_camera_image())
            if warning:
                log(warning)
    log(tally.summary())
    return n
