"""Test-side tools for the chunk executor tests over real DDS: a "perfect arm" driver, an independent FK and
an independent interpolation reference.

The driver lives in the test process (its own rclpy context, spun in a thread); the executor runs as a child process
(``python -m para_ros.nodes.chunk_executor``). The driver publishes chunks and ``/joint_states`` (the initial pose, then
every commanded position echoed back, like an arm that tracks perfectly; ``publish_states = False`` cuts them), and
records every JointTrajectory, commanded pose and diagnostics message with its arrival time.

References are independent of the code under test: FK is the i2rt SDK's own ``Kinematics`` on its MJCF;
interpolation is ``numpy.interp`` for positions/gripper and ``scipy.spatial.transform.Slerp`` for orientations.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml
from ros_helpers import start_python, stop_process, wait_for
from scipy.spatial.transform import Rotation, Slerp

from para_ros.ros_io.spin import spin_until

REPO = Path(__file__).resolve().parent.parent
TOP_DOWN_R = np.array([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]).T  # columns: tool x, y, z in base


def load_limits() -> dict:
    """The raw limits section of config/yam.yaml (read here with plain yaml, not through the code under test)."""
    return yaml.safe_load((REPO / "config" / "yam.yaml").read_text())["limits"]


class ReferenceKinematics:
    """FK/IK straight from the i2rt SDK (8-joint MJCF: 6 arm joints + 2 finger slides held at 0)."""

    def __init__(self):
        import mink
        from i2rt.robots.kinematics import Kinematics
        from i2rt.robots.utils import ArmType, GripperType, combine_arm_and_gripper_xml

        xml = combine_arm_and_gripper_xml(ArmType.YAM, GripperType.LINEAR_4310)
        try:
            self.kin = Kinematics(xml, "grasp_site")
        finally:
            os.remove(xml)
        self.model = self.kin._configuration.model
        self.limits = [mink.ConfigurationLimit(self.model)]

    def fk(self, q6) -> np.ndarray:
        q = np.zeros(self.model.nq)
        q[:6] = q6
        return self.kin.fk(q).copy()

    def ik(self, position, R, seed6=None) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = R
        T[:3, 3] = position
        q = np.zeros(self.model.nq)
        if seed6 is not None:
            q[:6] = seed6
        else:
            q[:6] = [0.0, 1.6, 1.3, -1.2, 0.0, 0.0]
        ok, sol = self.kin.ik(T, "grasp_site", init_q=q, limits=self.limits, max_iters=500)
        assert ok, f"reference IK failed for {position}"
        return np.array(sol[:6])


def reference_interp(stamp_s, t_from_stamp_s, positions, quats_xyzw, gripper, t_s):
    """Independent interpolation of a chunk at absolute time ``t_s`` (returns position, Rotation, gripper)."""
    due = stamp_s + np.asarray(t_from_stamp_s)
    pos = np.array([np.interp(t_s, due, positions[:, k]) for k in range(3)])
    rot = Slerp(due, Rotation.from_quat(quats_xyzw))([np.clip(t_s, due[0], due[-1])])[0]
    grip = float(np.interp(t_s, due, gripper))
    return pos, rot, grip


def stamp_s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class ExecutorDriver:
    """The test's side of the graph: publishes chunks and joint states, records the executor's outputs."""

    def __init__(self, prefix: str, q_init: np.ndarray, gripper_init: float = 0.5, joint_names=None):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        from para_msgs.msg import ActionChunk

        self.prefix = prefix
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = rclpy.create_node("executor_test_driver", context=self.ctx)
        deep = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
        self.chunk_pub = self.node.create_publisher(
            ActionChunk, f"{prefix}/chunks", QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.js_pub = self.node.create_publisher(JointState, f"{prefix}/joint_states", 10)
        self.lock = threading.Lock()
        self.commands: list[tuple[float, object]] = []  # (arrival wall time, JointTrajectory)
        self.poses: list[tuple[float, object]] = []
        self.diagnostics: list[object] = []
        self.q_arm = np.asarray(q_init, dtype=float).copy()
        self.gripper = float(gripper_init)
        self.names = list(joint_names or [f"joint{i}" for i in range(1, 7)]) + ["gripper"]  # the arm's, then gripper
        self.publish_states = True  # False: the arm's /joint_states fall silent (a cut cable, a dead driver)
        self.last_state_publish_s = float("nan")  # wall time of the latest /joint_states sent
        self._JointState = JointState
        self.node.create_subscription(JointTrajectory, f"{prefix}/joint_trajectory", self._on_command, deep)
        self.node.create_subscription(PoseStamped, f"{prefix}/commanded_pose", self._on_pose, deep)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, deep)
        self.node.create_timer(0.01, self._publish_joint_state)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.proc = None
        self.log_path = None

    def _spin(self):
        spin_until(self.executor, lambda: not self.ctx.ok(), on_error="stop")

    def _on_command(self, msg):
        with self.lock:
            self.commands.append((time.time(), msg))
            pos = dict(zip(msg.joint_names, msg.points[0].positions))
            self.q_arm = np.array([pos[n] for n in self.names[:-1]])
            self.gripper = float(pos.get("gripper", self.gripper))
        self._publish_joint_state()

    def _on_pose(self, msg):
        with self.lock:
            self.poses.append((time.time(), msg))

    def _on_diag(self, msg):
        with self.lock:
            self.diagnostics.extend(s for s in msg.status if s.name.startswith("chunk_executor"))

    def _publish_joint_state(self):
        if not self.publish_states:
            return
        msg = self._JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        with self.lock:
            msg.name = list(self.names)
            msg.position = [float(v) for v in self.q_arm] + [self.gripper]
            self.last_state_publish_s = time.time()
        self.js_pub.publish(msg)

    # ---- the executor process -------------------------------------------------------------------------------------

    def start_executor(self, node_name: str, **params) -> None:
        p = {
            "chunk_topic": f"{self.prefix}/chunks",
            "joint_states_topic": f"{self.prefix}/joint_states",
            "joint_trajectory_topic": f"{self.prefix}/joint_trajectory",
            "commanded_pose_topic": f"{self.prefix}/commanded_pose",
            "diagnostics_rate_hz": 5.0,
            "auto_engage": "true",
            # short synthetic chunks whose poses are checked against tick + command_lookahead_s: the lead that a
            # fresh PARA chunk needs (tested on its own) would move the target past them
            "chunk_min_lead_s": 0.0,
            **params,
        }  # these tests drive the executor directly: engaged from the start
        args = ["para_ros.nodes.chunk_executor", "--ros-args", "-r", f"__node:={node_name}"]
        for k, v in p.items():
            args += ["-p", f"{k}:={v}"]
        fd, self.log_path = tempfile.mkstemp(prefix="chunk_executor_test_", suffix=".log")
        self._log = os.fdopen(fd, "w")
        self.proc = start_python(args, module=True, stdout=self._log)

    def executor_log(self) -> str:
        return Path(self.log_path).read_text() if self.log_path else ""

    def wait_for_commands(self, n: int = 5, timeout_s: float = 60.0) -> None:
        start = len(self.commands)

        def ready():
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"executor exited with {self.proc.returncode}:\n{self.executor_log()}")
            return len(self.commands) >= start + n

        wait_for(ready, timeout_s, what=f"{n} commands from the executor")

    def call_trigger(self, node_name: str, service: str, timeout_s: float = 10.0):
        from std_srvs.srv import Trigger

        client = self.node.create_client(Trigger, f"/{node_name}/{service}")
        assert client.wait_for_service(timeout_sec=timeout_s), f"service /{node_name}/{service} not available"
        future = client.call_async(Trigger.Request())
        wait_for(future.done, timeout_s, what=f"/{node_name}/{service} response")
        return future.result()

    def publish_chunk(
        self,
        stamp,
        t_from_stamp,
        positions,
        quats,
        gripper,
        confidence=None,
        frame_id="base",
        tool_frame_id="grasp_site",
    ):
        from builtin_interfaces.msg import Duration
        from geometry_msgs.msg import Pose

        from para_msgs.msg import ActionChunk
        from para_ros.stamps import s_to_fields

        msg = ActionChunk()
        msg.header.stamp.sec, msg.header.stamp.nanosec = s_to_fields(stamp)
        msg.header.frame_id = frame_id
        msg.tool_frame_id = tool_frame_id
        msg.model_id = "test@0"
        for dt in t_from_stamp:
            d = Duration()
            d.sec, d.nanosec = s_to_fields(float(dt))
            msg.time_from_stamp.append(d)
        for p, q in zip(positions, quats):
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in p)
            pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = (float(v) for v in q)
            msg.poses.append(pose)
        msg.gripper = [float(g) for g in gripper]
        n = len(t_from_stamp)
        msg.confidence = [float(c) for c in (np.ones(n) if confidence is None else confidence)]
        self.chunk_pub.publish(msg)
        return msg

    def snapshot(self):
        with self.lock:
            return list(self.commands), list(self.poses), list(self.diagnostics)

    def close(self) -> str:
        out = ""
        if self.proc is not None:
            stop_process(self.proc, timeout_s=10.0)
            self._log.close()
            out = self.executor_log()
            os.remove(self.log_path)
        self.executor.shutdown()
        self.node.destroy_node()
        self.ctx.try_shutdown()
        self._thread.join(timeout=2.0)
        return out


def command_arrays(commands, names=None):
    """(N,) stamps (s), (N,) time_from_start (s), (N, n) joints, (N,) gripper from recorded JointTrajectory messages
    (``names``: the arm joints, the YAM's joint1..joint6 by default)."""
    names = list(names or [f"joint{i}" for i in range(1, 7)])
    stamps, tfs, q, g = [], [], [], []
    for _, msg in commands:
        pos = dict(zip(msg.joint_names, msg.points[0].positions))
        stamps.append(stamp_s(msg.header.stamp))
        tfs.append(stamp_s(msg.points[0].time_from_start))
        q.append([pos[n] for n in names])
        g.append(pos["gripper"])
    return np.array(stamps), np.array(tfs), np.array(q).reshape(-1, len(names)), np.array(g)


def pose_arrays(poses):
    """Recorded commanded poses (PoseStamped) sorted by stamp: (N,) stamps (s; the node's time each pose is meant
    for = its tick + lookahead), (N, 3) positions (m), (N, 4) quaternions (x, y, z, w)."""
    stamps = np.array([stamp_s(msg.header.stamp) for _, msg in poses])
    pos = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z] for _, m in poses]).reshape(-1, 3)
    quat = np.array(
        [[m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w] for _, m in poses]
    ).reshape(-1, 4)
    order = np.argsort(stamps, kind="stable")
    return stamps[order], pos[order], quat[order]


def diag_values(status) -> dict[str, str]:
    """The key/value pairs of a DiagnosticStatus."""
    return {kv.key: kv.value for kv in status.values}


def nearest_pose(kin, q, pose_positions):
    """For each (6,) joint command in ``q`` (N, 6): index of the commanded pose whose position is nearest to the
    reference FK of the command, and that distance (m). Pairs commands with poses without relying on arrival order."""
    p_cmd = np.array([kin.fk(qi)[:3, 3] for qi in q]).reshape(-1, 3)  # (N, 3)
    dist = np.linalg.norm(p_cmd[:, None, :] - np.asarray(pose_positions)[None, :, :], axis=2)  # (N, M)
    idx = np.argmin(dist, axis=1)  # (N,)
    return idx, dist[np.arange(len(idx)), idx]
