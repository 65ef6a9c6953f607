"""The i2rt SDK backend (the SDK's MuJoCo SimRobot, ``sim=True``) against the JointTrajectory topic backend.

1. The same chunk, ticked at the same instants, drives the SDK robot to exactly the joint targets that the topic
   backend publishes over real DDS (and the SDK robot ends where the chunk says, by the SDK's own FK).
2. The node with ``backend:=i2rt_sdk sdk_sim:=true`` runs as a child process and its commanded poses follow a chunk.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

pytestmark = pytest.mark.ros

from executor_helpers import TOP_DOWN_R, ReferenceKinematics, stamp_s  # noqa: E402
from ros_helpers import spinner_thread, start_python, stop_process, wait_for  # noqa: E402


def _chunk(stamp, p0, R0, v, n=15, step=0.1):
    from para_ros.execution.chunk import Chunk

    t = np.arange(n) * step
    pos = np.asarray(p0) + np.outer(t, v)
    quat = Rotation.from_matrix(R0).as_quat()
    return Chunk(stamp, t, pos, np.tile(quat, (n, 1)), np.linspace(0.8, 0.3, n), np.ones(n), "base", "grasp_site")


def test_sdk_sim_backend_gets_the_same_joint_targets_as_the_topic_backend():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from para_ros.execution.backends import I2rtSdkBackend
    from para_ros.execution.chunk import ChunkChecks
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
    from para_ros.robot.yam import load_yam_config
    from para_ros.ros_io.topic_backends import JointTrajectoryBackend

    ref = ReferenceKinematics()
    q_init = ref.ik([0.30, 0.0, 0.12], TOP_DOWN_R)
    yam = load_yam_config()

    def core():
        checks = ChunkChecks(workspace_min_m=yam.limits.workspace_min_m, workspace_max_m=yam.limits.workspace_max_m)
        return ExecutorCore(
            ExecutorConfig(
                checks=checks, stale_timeout_s=5.0, start_engaged=True, joint_state_timeout_s=None, chunk_min_lead_s=0.0
            ),
            yam,
        )

    sdk = I2rtSdkBackend(sim=True)
    assert not os.path.exists(sdk.robot.xml_path), "the SDK's temp MJCF was not cleaned up"
    sdk.robot.command_joint_pos(np.append(q_init, 0.8))

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("executor_backend_test", context=ctx)
    received = []
    node.create_subscription(JointTrajectory, "/exec_sdk_eq/joint_trajectory", received.append, 1000)
    js_pub = node.create_publisher(JointState, "/exec_sdk_eq/joint_states", 10)
    topic = JointTrajectoryBackend(
        node, "/exec_sdk_eq/joint_trajectory", "/exec_sdk_eq/joint_states", yam.model.joint_names, "gripper"
    )
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    try:
        js = JointState(name=[f"joint{i}" for i in range(1, 7)] + ["gripper"], position=list(q_init) + [0.8])
        wait_for(
            lambda: topic.read_joints() is not None,
            20.0,
            spin=lambda: (js_pub.publish(js), ex.spin_once(timeout_sec=0.05)),
            what="joint state over DDS",
        )
        wait_for(
            lambda: topic.pub.get_subscription_count() > 0,
            20.0,
            spin=lambda: ex.spin_once(timeout_sec=0.05),
            what="trajectory subscriber",
        )
        core_sdk, core_topic = core(), core()
        core_sdk.set_measured_joints(*sdk.read_joints())
        core_topic.set_measured_joints(*topic.read_joints())
        T0 = ref.fk(q_init)
        t0 = 1000.0
        chunk = _chunk(t0 - 0.2, T0[:3, 3] - 0.2 * np.array([0.05, 0.03, 0.02]), T0[:3, :3], [0.05, 0.03, 0.02])
        assert (
            core_sdk.add_chunk(chunk, t0)[0]
            and core_topic.add_chunk(
                _chunk(t0 - 0.2, T0[:3, 3] - 0.2 * np.array([0.05, 0.03, 0.02]), T0[:3, :3], [0.05, 0.03, 0.02]), t0
            )[0]
        )
        q_sdk = []
        n_ticks = 100
        for k in range(n_ticks):
            now = t0 + 0.01 * k
            sdk.send(core_sdk.tick(now))
            q_sdk.append(np.asarray(sdk.robot.get_joint_pos(), float))
            topic.send(core_topic.tick(now))
            ex.spin_once(timeout_sec=0.0)
        wait_for(
            lambda: len(received) >= n_ticks,
            20.0,
            spin=lambda: ex.spin_once(timeout_sec=0.05),
            what="all JointTrajectory messages",
        )
        q_topic = np.array([list(m.points[0].positions) for m in received[:n_ticks]])  # (N, 7)
        assert received[0].joint_names == [f"joint{i}" for i in range(1, 7)] + ["gripper"]
        # Stamped 0 (start on receipt: a real joint_trajectory_controller drops a stamped trajectory that ends in
        # the past on arrival), the single point due a lookahead after receipt.
        for m in received[:n_ticks]:
            assert (m.header.stamp.sec, m.header.stamp.nanosec) == (0, 0)
            assert stamp_s(m.points[0].time_from_start) == pytest.approx(core_sdk.config.command_lookahead_s)
        q_sdk = np.array(q_sdk)  # (N, 7)
        np.testing.assert_allclose(q_sdk, q_topic, atol=1e-12)
        assert np.abs(q_sdk[-1, :6] - q_init).max() > 0.02, "the SDK robot did not move"
        # And the SDK robot is where the chunk says at the last command's target time (SDK's own FK).
        t_target = t0 + 0.01 * (n_ticks - 1) + core_sdk.config.command_lookahead_s
        p_ref = chunk.positions_m[0] + (t_target - chunk.stamp_s) * np.array([0.05, 0.03, 0.02])
        assert np.linalg.norm(ref.fk(q_sdk[-1, :6])[:3, 3] - p_ref) < 2e-3
    finally:
        ex.shutdown()
        node.destroy_node()
        ctx.try_shutdown()
        sdk.close()


def test_node_with_sdk_sim_backend_follows_a_chunk(tmp_path):
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor

    from para_msgs.msg import ActionChunk
    from para_ros.ros_io.chunk_msg import chunk_to_msg

    ref = ReferenceKinematics()
    T_home = ref.fk(np.zeros(6))  # the SDK's SimRobot starts at all-zero joints
    log = open(tmp_path / "executor.log", "w")
    proc = start_python(
        [
            "para_ros.nodes.chunk_executor",
            "--ros-args",
            "-r",
            "__node:=chunk_executor_sdk",
            "-p",
            "backend:=i2rt_sdk",
            "-p",
            "sdk_sim:=true",
            "-p",
            "auto_engage:=true",
            "-p",
            "chunk_topic:=/exec_sdk/chunks",
            "-p",
            "commanded_pose_topic:=/exec_sdk/pose",
        ],
        module=True,
        stdout=log,
    )
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("executor_sdk_node_test", context=ctx)
    poses = []
    node.create_subscription(PoseStamped, "/exec_sdk/pose", lambda m: poses.append(m), 1000)
    pub = node.create_publisher(ActionChunk, "/exec_sdk/chunks", 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)

    spin = spinner_thread(ex, ctx)
    try:
        spin.start()
        wait_for(lambda: len(poses) > 10 or proc.poll() is not None, 90.0, what="commanded poses from the node")
        assert proc.poll() is None, (tmp_path / "executor.log").read_text()
        v = np.array([0.0, 0.0, 0.03])  # straight up from the folded home pose
        t_first = time.time()
        while time.time() - t_first < 1.0:
            stamp = time.time() - 0.1
            c = _chunk(stamp, T_home[:3, 3] + (stamp - t_first) * v, T_home[:3, :3], v)
            pub.publish(chunk_to_msg(c))
            time.sleep(0.1)
        time.sleep(0.1)
        got = [p for p in list(poses) if t_first + 0.05 <= stamp_s(p.header.stamp) <= t_first + 0.9]
        assert len(got) > 50
        for p in got:
            t = stamp_s(p.header.stamp)  # the pose is stamped with the time it is meant for (tick + lookahead)
            expect = T_home[:3, 3] + (t - t_first) * v
            pos = np.array([p.pose.position.x, p.pose.position.y, p.pose.position.z])
            assert np.linalg.norm(pos - expect) < 2e-3, (pos, expect)
    finally:
        ctx.try_shutdown()
        spin.join(timeout=2.0)
        stop_process(proc, timeout_s=10.0)
        log.close()


def test_pose_backend_publishes_the_tool_pose_of_each_checked_command():
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64

    from para_ros.execution.chunk import ChunkChecks
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
    from para_ros.robot.yam import load_yam_config
    from para_ros.ros_io.topic_backends import PoseBackend

    ref = ReferenceKinematics()
    q_init = ref.ik([0.32, 0.05, 0.10], TOP_DOWN_R)
    yam = load_yam_config()
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("executor_pose_backend_test", context=ctx)
    poses, grippers = [], []
    node.create_subscription(PoseStamped, "/exec_pose/target", poses.append, 1000)
    node.create_subscription(Float64, "/exec_pose/gripper", grippers.append, 1000)
    js_pub = node.create_publisher(JointState, "/exec_pose/joint_states", 10)
    backend = PoseBackend(
        node,
        "/exec_pose/target",
        "/exec_pose/gripper",
        "/exec_pose/joint_states",
        yam.model.joint_names,
        "gripper",
        "base",
    )
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    try:
        js = JointState(
            name=["gripper"] + [f"joint{i}" for i in range(6, 0, -1)],  # any order: matched by name
            position=[0.7] + list(q_init[::-1]),
        )
        wait_for(
            lambda: backend.read_joints() is not None,
            20.0,
            spin=lambda: (js_pub.publish(js), ex.spin_once(timeout_sec=0.05)),
            what="joint state over DDS",
        )
        q_read, g_read = backend.read_joints()
        np.testing.assert_allclose(q_read, q_init)
        assert g_read == 0.7
        checks = ChunkChecks(workspace_min_m=yam.limits.workspace_min_m, workspace_max_m=yam.limits.workspace_max_m)
        core = ExecutorCore(
            ExecutorConfig(checks=checks, start_engaged=True, joint_state_timeout_s=None, chunk_min_lead_s=0.0), yam
        )
        core.set_measured_joints(q_read, g_read)
        T0 = ref.fk(q_init)
        core.add_chunk(_chunk(99.9, T0[:3, 3], T0[:3, :3], [0.0, -0.04, 0.0]), 100.0)
        commands = [core.tick(100.0 + 0.01 * k) for k in range(30)]
        for c in commands:
            backend.send(c)
        wait_for(
            lambda: len(poses) >= 30 and len(grippers) >= 30,
            20.0,
            spin=lambda: ex.spin_once(timeout_sec=0.05),
            what="pose commands",
        )
        lookahead_s = core.config.command_lookahead_s
        for k, (c, msg) in enumerate(zip(commands, poses)):
            # Stamped with the time the pose is meant for: tick (100 s + k * 10 ms) + lookahead, not the tick.
            assert abs(stamp_s(msg.header.stamp) - (100.0 + 0.01 * k + lookahead_s)) < 1e-9
            T = ref.fk(c.q_rad)
            p = msg.pose.position
            o = msg.pose.orientation
            assert msg.header.frame_id == "base"
            assert np.linalg.norm(np.array([p.x, p.y, p.z]) - T[:3, 3]) < 1e-9
            assert (Rotation.from_quat([o.x, o.y, o.z, o.w]).inv() * Rotation.from_matrix(T[:3, :3])).magnitude() < 1e-6
        np.testing.assert_allclose([g.data for g in grippers[:30]], [c.gripper for c in commands])
    finally:
        ex.shutdown()
        node.destroy_node()
        ctx.try_shutdown()
