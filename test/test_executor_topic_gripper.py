"""``backend:=topic`` (an arm behind a ros2_control joint_trajectory_controller) over real DDS.

The executor is started with exactly the command line ``para-deploy --backend topic --joint-trajectory-topic ...
--arm-joint-names ...`` builds (``para_ros.deploy.graph_run.graph_commands``), plus test topics for the chunks and joint states.
This process plays the controller: it publishes ``JointState`` the way a joint_state_broadcaster does (the
controller's arm joint names and a finger joint in metres, no 0..1 ``gripper``), echoes every commanded position
back, and records what arrives. Checked:

* every trajectory names exactly the controller's 6 arm joints (a real controller rejects the whole message when it
  names a joint it does not own, such as ``gripper``), on the controller's topic;
* no gripper command goes out before a chunk says where the gripper should be (its state is not measured: the
  executor must not command it closed at start-up);
* then the gripper goes out on its own topic (``std_msgs/Float64``, 0 closed .. 1 open) and follows the chunk's
  gripper values (rate limit of config/yam.yaml), and the arm follows the chunk (independent FK: the SDK's own).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time

import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

pytestmark = pytest.mark.ros

from executor_helpers import REPO, TOP_DOWN_R, ReferenceKinematics  # noqa: E402
from ros_helpers import spinner_thread, start_python, stop_process, wait_for  # noqa: E402

ARM = ["shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3"]
TRAJ_TOPIC = "/arm_controller/joint_trajectory"


def _executor_command():
    from para_ros.commands import deploy

    args = deploy.build_parser().parse_args(
        [
            "--robot",
            "topic",
            "--checkpoint",
            "/some/ckpt",
            "--engage",
            "--joint-trajectory-topic",
            TRAJ_TOPIC,
            "--arm-joint-names",
            ",".join(ARM),
        ]
    )
    cmd = dict((spec.name, c) for spec, c in deploy.graph_commands(deploy._settings(args)))["chunk_executor"]
    assert "gripper_joint_name:=''" in cmd and f"joint_trajectory_topic:={TRAJ_TOPIC}" in cmd
    gripper_topic = yaml.safe_load((REPO / "config" / "executor.yaml").read_text())["chunk_executor"][
        "ros__parameters"
    ]["gripper_command_topic"]
    extra = [
        "-p",
        "chunk_topic:=/topic_be/chunks",
        "-p",
        "joint_states_topic:=/topic_be/joint_states",
        "-p",
        "commanded_pose_topic:=/topic_be/pose",
        "-p",
        "stale_timeout_s:=5.0",
    ]
    return cmd[2:] + extra, gripper_topic  # cmd = [python, -m, module, --ros-args, ...]


def test_topic_backend_sends_arm_joints_only_and_the_gripper_on_its_own_topic():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64
    from trajectory_msgs.msg import JointTrajectory

    from para_msgs.msg import ActionChunk
    from para_ros.execution.chunk import Chunk
    from para_ros.ros_io.chunk_msg import chunk_to_msg

    ref = ReferenceKinematics()
    q_init = ref.ik([0.30, 0.0, 0.15], TOP_DOWN_R)
    max_gripper_speed = yaml.safe_load((REPO / "config" / "yam.yaml").read_text())["limits"]["max_gripper_speed_per_s"]
    args, gripper_topic = _executor_command()
    fd, log_path = tempfile.mkstemp(prefix="topic_backend_", suffix=".log")
    log = os.fdopen(fd, "w")
    proc = start_python(args, module=True, stdout=log)

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("topic_backend_controller", context=ctx)
    lock = threading.Lock()
    trajectories, grippers = [], []  # (arrival time, msg)
    state = {"q": q_init.copy()}
    js_pub = node.create_publisher(JointState, "/topic_be/joint_states", 10)

    def publish_state():
        with lock:
            q = state["q"].copy()
        # as a joint_state_broadcaster: the controller's joints plus a finger joint in metres, no "gripper"
        js_pub.publish(JointState(name=["finger_joint"] + ARM, position=[0.02] + [float(v) for v in q]))

    def on_trajectory(msg):
        with lock:
            trajectories.append((time.time(), msg))
            if list(msg.joint_names) == ARM:
                state["q"] = np.array(msg.points[0].positions)
        publish_state()

    deep = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(JointTrajectory, TRAJ_TOPIC, on_trajectory, deep)
    node.create_subscription(Float64, gripper_topic, lambda m: grippers.append((time.time(), m)), deep)
    node.create_timer(0.01, publish_state)
    chunk_pub = node.create_publisher(ActionChunk, "/topic_be/chunks", 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)

    spin = spinner_thread(ex, ctx)
    try:
        spin.start()

        def commanding():
            assert proc.poll() is None, open(log_path).read()
            return len(trajectories) >= 50

        wait_for(commanding, 90.0, what="trajectories from the executor")
        assert not grippers, "a gripper command went out before any chunk gave a gripper value (state unmeasured)"

        # Chunks: tool moving +y at 3 cm/s, gripper closing from 0.9 at 0.5 per second.
        T0 = ref.fk(q_init)
        quat = Rotation.from_matrix(T0[:3, :3]).as_quat()
        v = np.array([0.0, 0.03, 0.0])
        t_first = time.time()
        while time.time() - t_first < 1.2:
            stamp = time.time() - 0.1
            n = 12
            t = np.arange(n) * 0.1
            ts = (stamp - t_first) + t
            chunk_pub.publish(
                chunk_to_msg(
                    Chunk(
                        stamp,
                        t,
                        T0[:3, 3] + np.outer(ts, v),
                        np.tile(quat, (n, 1)),
                        np.clip(0.9 - 0.5 * ts, 0.0, 1.0),
                        np.ones(n),
                        "base",
                        "grasp_site",
                    )
                )
            )
            time.sleep(0.1)
        wait_for(lambda: len(grippers) >= 50, 20.0, what="gripper commands")
        with lock:
            trajs, grips = list(trajectories), list(grippers)
        assert proc.poll() is None, open(log_path).read()

        for _, msg in trajs:
            assert list(msg.joint_names) == ARM, msg.joint_names
            assert len(msg.points) == 1 and len(msg.points[0].positions) == 6
        g = np.array([m.data for _, m in grips])
        assert np.all((g >= 0.0) & (g <= 1.0))
        # The first gripper command is the chunk's own value at its target time (no ramp from an unknown state):
        # between 0.9 (chunk start) and 0.9 - 0.5 * 0.2 (first chunk's due time + lookahead, generous).
        assert 0.75 <= g[0] <= 0.9, g[:5]
        assert np.all(np.abs(np.diff(g)) <= max_gripper_speed * 0.01 * (1 + 1e-6) + 1e-9)
        assert g[-1] < g[0] - 0.2, "the gripper did not follow the chunk (closing at 0.5 per second)"
        # The arm followed the chunks: the tool moved +y by about 3 cm/s x 1.2 s and stayed on its line.
        q_last = np.array(trajs[-1][1].points[0].positions)
        p_last = ref.fk(q_last)[:3, 3]
        assert 0.02 < p_last[1] - T0[1, 3] < 0.06, p_last - T0[:3, 3]
        assert np.linalg.norm((p_last - T0[:3, 3])[[0, 2]]) < 3e-3
    finally:
        ctx.try_shutdown()
        spin.join(timeout=2.0)
        stop_process(proc, timeout_s=10.0)
        log.close()
        os.remove(log_path)
