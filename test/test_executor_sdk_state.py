"""With the ``i2rt_sdk`` backend the executor publishes the arm's ``/joint_states`` and ``/tf`` itself.

Independent references: the I2RT SDK's station model ``yam_station_linear_4310_d405`` (a different MJCF, with the
D405 body ``left_camera`` under ``left_gripper`` and the tool site ``tcp_left``, evaluated with plain MuJoCo) and the
SDK's own ``Kinematics`` FK of ``grasp_site`` (``executor_helpers.ReferenceKinematics``).

1. ROS-free: :class:`YamFrames` composes to the station model's camera and tool frames at random joint angles.
2. Over real DDS: the node (``backend:=i2rt_sdk sdk_sim:=true``, the SDK's MuJoCo SimRobot standing in for the CAN
   arm) publishes ``joint1..joint6 + gripper``; TF looked up the way the inference node does (``base <- grasp_site``,
   ``base <- wrist_cam_optical_frame`` at a joint-state stamp) matches the references for the joints published
   with that stamp; chunks then move the SDK robot and the published state follows it.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from executor_helpers import ReferenceKinematics, stamp_s  # noqa: E402
from ros_helpers import spinner_thread, start_python, stop_process, wait_for  # noqa: E402
from scipy.spatial.transform import Rotation

ARM = [f"joint{i}" for i in range(1, 7)]


class StationReference:
    """Left arm of the SDK's station model: base -> tcp_left (= grasp_site) and base -> left_camera (the D405)."""

    def __init__(self):
        import i2rt
        import mujoco

        path = os.path.join(
            os.path.dirname(i2rt.__file__),
            "robot_models",
            "station",
            "yam_station_linear_4310_d405",
            "yam_station_linear_4310_d405.xml",
        )
        self.mj = mujoco
        self.model = mujoco.MjModel.from_xml_path(path)
        self.data = mujoco.MjData(self.model)

    def _body(self, name):
        T = np.eye(4)
        b = self.model.body(name).id
        T[:3, :3] = self.data.xmat[b].reshape(3, 3)
        T[:3, 3] = self.data.xpos[b]
        return T

    def frames(self, q6):
        """(T_base_tool, T_base_camera) for the left arm at joints ``q6``."""
        for i, v in enumerate(q6):
            self.data.qpos[self.model.joint(f"left_joint{i + 1}").qposadr[0]] = v
        self.mj.mj_kinematics(self.model, self.data)
        T_w_base = self._body("left_base")
        s = self.model.site("tcp_left").id
        T_w_tool = np.eye(4)
        T_w_tool[:3, :3] = self.data.site_xmat[s].reshape(3, 3)
        T_w_tool[:3, 3] = self.data.site_xpos[s]
        inv = np.linalg.inv(T_w_base)
        return inv @ T_w_tool, inv @ self._body("left_camera")


def _close(T_a, T_b, tol_m=5e-5, tol_rad=5e-5):
    dp = np.linalg.norm(T_a[:3, 3] - T_b[:3, 3])
    dr = (Rotation.from_matrix(T_a[:3, :3]).inv() * Rotation.from_matrix(T_b[:3, :3])).magnitude()
    return dp <= tol_m and dr <= tol_rad, (dp, dr)


def _compose(transforms, child):
    by_child = {c: (p, T) for p, c, T in transforms}
    T = np.eye(4)
    while child in by_child:
        parent, T_pc = by_child[child]
        T = T_pc @ T
        child = parent
    assert child == "base", f"chain ends at {child}"
    return T


def test_yam_frames_match_the_sdk_station_model_and_sdk_fk():
    from para_ros.robot.yam import load_yam_config
    from para_ros.robot.yam_frames import YamFrames

    yam = load_yam_config()
    frames = YamFrames(yam.wrist_camera, yam.model.arm_type, yam.model.gripper_type, yam.model.tool_site)
    station, ref = StationReference(), ReferenceKinematics()
    rng = np.random.default_rng(0)
    lo, hi = yam.limits.joint_lower_rad, yam.limits.joint_upper_rad
    for _ in range(10):
        q = rng.uniform(lo, hi)
        tf = frames.transforms(q)
        assert [(p, c) for p, c, _ in tf] == [
            ("base", "link1"),
            ("link1", "link2"),
            ("link2", "link3"),
            ("link3", "link4"),
            ("link4", "link5"),
            ("link5", "gripper"),
            ("gripper", "grasp_site"),
            ("gripper", "wrist_cam_optical_frame"),
        ]
        T_tool, T_cam = station.frames(q)
        ok, err = _close(_compose(tf, "grasp_site"), ref.fk(q), 1e-9, 1e-9)
        assert ok, f"grasp_site vs SDK FK at {q}: {err}"
        ok, err = _close(_compose(tf, "grasp_site"), T_tool)  # the station rounds its origins to ~6 um
        assert ok, f"grasp_site vs station tcp_left at {q}: {err}"
        ok, err = _close(_compose(tf, "wrist_cam_optical_frame"), T_cam)
        assert ok, f"camera vs station left_camera at {q}: {err}"


def test_a_mount_that_is_not_on_the_arm_is_refused():
    from para_ros.robot.yam import WristCameraMount
    from para_ros.robot.yam_frames import YamFrames

    with pytest.raises(ValueError, match="parent_frame='table'"):
        YamFrames(WristCameraMount(parent_frame="table"))
    with pytest.raises(ValueError, match="quat_xyzw"):
        WristCameraMount(quat_xyzw=[0, 0, 0, 0])


@pytest.mark.ros
def test_sdk_backend_publishes_joint_states_and_tf_and_a_chunk_moves_the_robot(tmp_path):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.time import Time
    from sensor_msgs.msg import JointState

    from para_msgs.msg import ActionChunk
    from para_ros.adapters.tf import Buffer, TransformListener
    from para_ros.adapters.transforms import transform_to_matrix
    from para_ros.execution.chunk import Chunk
    from para_ros.ros_io.chunk_msg import chunk_to_msg

    ref, station = ReferenceKinematics(), StationReference()
    log = open(tmp_path / "executor.log", "w")
    proc = start_python(
        [
            "para_ros.nodes.chunk_executor",
            "--ros-args",
            "-r",
            "__node:=chunk_executor_sdk_state",
            "-p",
            "backend:=i2rt_sdk",
            "-p",
            "sdk_sim:=true",
            "-p",
            "state_publish_rate_hz:=50.0",
            "-p",
            "auto_engage:=true",
            "-p",
            "joint_states_topic:=/sdk_state/joint_states",
            "-p",
            "chunk_topic:=/sdk_state/chunks",
            "-p",
            "commanded_pose_topic:=/sdk_state/pose",
        ],
        module=True,
        stdout=log,
    )
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("sdk_state_test", context=ctx)
    lock = threading.Lock()
    states = []
    node.create_subscription(
        JointState, "/sdk_state/joint_states", lambda m: (lock.acquire(), states.append(m), lock.release()), 1000
    )
    buffer = Buffer(node=node)
    TransformListener(buffer, node)
    pub = node.create_publisher(ActionChunk, "/sdk_state/chunks", 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)

    def lookup(child, stamp):
        return transform_to_matrix(buffer.lookup_transform("base", child, Time.from_msg(stamp)))

    def check_state(msg):
        """TF at this joint state's stamp == the references at its joints (what the inference node relies on)."""
        q = np.array(msg.position[:6])
        T_tool_ref, T_cam_ref = station.frames(q)
        wait_for(
            lambda: buffer.can_transform("base", "wrist_cam_optical_frame", Time.from_msg(msg.header.stamp)),
            10.0,
            what="TF at the joint state's stamp",
        )
        ok, err = _close(lookup("grasp_site", msg.header.stamp), ref.fk(q), 1e-6, 1e-6)
        assert ok, f"TF grasp_site vs SDK FK of the published joints: {err}"
        ok, err = _close(lookup("wrist_cam_optical_frame", msg.header.stamp), T_cam_ref)
        assert ok, f"TF wrist camera vs the station model's D405: {err}"
        return q

    spin = spinner_thread(ex, ctx)
    try:
        spin.start()
        wait_for(lambda: len(states) > 20 or proc.poll() is not None, 90.0, what="joint states from the node")
        assert proc.poll() is None, (tmp_path / "executor.log").read_text()
        wait_for(lambda: buffer.can_transform("base", "wrist_cam_optical_frame", Time()), 20.0, what="TF")
        with lock:
            first = states[-1]
            stamps = [stamp_s(m.header.stamp) for m in states]
        assert list(first.name) == ARM + ["gripper"]
        assert all(b > a for a, b in zip(stamps, stamps[1:])), "joint state stamps must increase"
        assert abs(stamps[-1] - time.time()) < 5.0, "stamped with the read time on the node's (wall) clock"
        q0 = check_state(first)
        np.testing.assert_allclose(q0, np.zeros(6), atol=1e-9)  # the SDK's SimRobot starts at all-zero joints
        assert 0.0 <= first.position[6] <= 1.0

        # A chunk moves the SDK robot: straight up at 3 cm/s, gripper to the other end; the published state follows.
        T_home = ref.fk(q0)
        g_target = 0.9 if first.position[6] < 0.5 else 0.1
        v = np.array([0.0, 0.0, 0.03])
        t_first = time.time()
        while time.time() - t_first < 1.5:
            stamp = time.time() - 0.1
            n = 15
            t = np.arange(n) * 0.1
            pos = T_home[:3, 3] + np.outer((stamp - t_first) + t, v)
            quat = np.tile(Rotation.from_matrix(T_home[:3, :3]).as_quat(), (n, 1))
            pub.publish(
                chunk_to_msg(Chunk(stamp, t, pos, quat, np.full(n, g_target), np.ones(n), "base", "grasp_site"))
            )
            time.sleep(0.1)
        time.sleep(0.2)
        with lock:
            last = states[-1]
        assert proc.poll() is None, (tmp_path / "executor.log").read_text()
        q1 = check_state(last)
        assert np.abs(q1 - q0).max() > 0.01, "the SDK robot did not move"
        rise_m = ref.fk(q1)[2, 3] - T_home[2, 3]
        assert 0.02 < rise_m < 0.07, f"tool rose {rise_m:.4f} m; the chunks asked for about 0.045 m"
        assert abs(last.position[6] - g_target) < 0.05, "the gripper command did not reach the SDK robot"
    finally:
        ctx.try_shutdown()
        spin.join(timeout=2.0)
        stop_process(proc, timeout_s=10.0)
        log.close()
