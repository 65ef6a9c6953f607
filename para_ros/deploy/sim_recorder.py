"""``para-sim record``: expert demonstrations through the sim node, recorded as rosbag2 (MCAP) bags with the topics
a real rig records, so the training data path is the one a user follows: bag -> ``para-bag extract`` ->
``para-train``.

The sim node runs as its own process (the deploy graph's ``sim_node`` with its shipped parameters); this process
holds an expert node that, per episode, sets ``task_seed``, calls ``/sim_node/reset_task``, opens a new bag, streams
the scripted expert's joint targets as one-point ``JointTrajectory`` commands at ``control_rate_hz`` (tool pose from
:mod:`para_ros.sim.expert` through the YAM's IK, seeded with the previous solution) and records, as the CDR bytes
DDS delivered: both cameras' ``image_raw`` + ``camera_info``, ``/tf``, ``/tf_static`` (latched, written at the start of
every bag) and ``/joint_states``. ``/sim_node/task_state`` tells the outcome; failed demonstrations are deleted
unless ``--keep-failures``.

Not bit-identical to ``para-sim demos`` (the ROS-free fast path): here the expert runs on the wall clock over DDS, so
command timing jitters by milliseconds; the layouts of a seed are the same.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np

from para_ros.bag.recording import McapRecorder
from para_ros.deploy import graph
from para_ros.deploy.graph_run import GraphRun
from para_ros.robot.yam_ik import YamKinematics
from para_ros.ros_io.spin import spin_until
from para_ros.ros_io.task_services import reset_task
from para_ros.sim.expert import plan_pick_place
from para_ros.sim.pick_place import Layout

RECORDED = {
    "/scene_cam/image_raw": "sensor_msgs/msg/Image",
    "/scene_cam/camera_info": "sensor_msgs/msg/CameraInfo",
    "/wrist_cam/image_raw": "sensor_msgs/msg/Image",
    "/wrist_cam/camera_info": "sensor_msgs/msg/CameraInfo",
    "/tf": "tf2_msgs/msg/TFMessage",
    "/tf_static": "tf2_msgs/msg/TFMessage",
    "/joint_states": "sensor_msgs/msg/JointState",
}


class _ExpertNode:
    def __init__(self):
        import rclpy  # rclpy: loaded on first use, not on import
        from rcl_interfaces.srv import SetParameters
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from sensor_msgs.msg import CameraInfo, Image, JointState
        from std_msgs.msg import String
        from std_srvs.srv import Trigger
        from tf2_msgs.msg import TFMessage
        from trajectory_msgs.msg import JointTrajectory

        rclpy.init(args=[])  # the command's own argv is not ROS arguments
        self.rclpy = rclpy
        self.node = n = Node("para_sim_expert")
        self.lock = threading.Lock()
        self.recorder = None
        self.static_raw: bytes | None = None
        self.last_state: dict | None = None
        types = {
            "sensor_msgs/msg/Image": Image,
            "sensor_msgs/msg/CameraInfo": CameraInfo,
            "tf2_msgs/msg/TFMessage": TFMessage,
            "sensor_msgs/msg/JointState": JointState,
        }
        for topic, type_name in RECORDED.items():
            qos = QoSProfile(depth=50)
            if topic == "/tf_static":
                qos = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            n.create_subscription(types[type_name], topic, lambda data, t=topic: self._on_raw(t, data), qos, raw=True)
        n.create_subscription(String, "/sim_node/task_state", self._on_state, QoSProfile(depth=10))
        self.traj_pub = n.create_publisher(JointTrajectory, "/joint_trajectory", QoSProfile(depth=10))
        self.reset_client = n.create_client(Trigger, "/sim_node/reset_task")
        self.param_client = n.create_client(SetParameters, "/sim_node/set_parameters")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(n)
        self._running = True
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        spin_until(self.executor, lambda: not self._running, period_s=0.02, on_error="continue")

    def _on_raw(self, topic: str, data: bytes) -> None:
        with self.lock:
            if topic == "/tf_static":
                self.static_raw = bytes(data)
            if self.recorder is not None:
                self.recorder.write(topic, time.time_ns(), data)

    def _on_state(self, msg) -> None:
        with self.lock:
            self.last_state = json.loads(msg.data)

    def reset(self, seed: int) -> dict:
        return reset_task(self.param_client, self.reset_client, seed)

    def send(self, q7: np.ndarray, dt_s: float) -> None:
        from builtin_interfaces.msg import Duration  # rclpy: loaded on first use, not on import
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        from para_ros.sim.yam_scene import COMMAND_JOINT_NAMES  # mujoco: loaded on first use, not on import

        msg = JointTrajectory()
        msg.joint_names = list(COMMAND_JOINT_NAMES)
        ns = int(round(dt_s * 1e9))
        msg.points = [
            JointTrajectoryPoint(
                positions=[float(v) for v in q7], time_from_start=Duration(sec=ns // 10**9, nanosec=ns % 10**9)
            )
        ]
        self.traj_pub.publish(msg)

    def close(self):
        self._running = False
        self._thread.join(timeout=2.0)
        self.node.destroy_node()
        self.rclpy.try_shutdown()


def record_episodes(
    out: Path,
    episodes: int,
    seed: int,
    control_rate_hz: float = 50.0,
    keep_failures: bool = False,
    progress: bool = True,
    echo: bool = False,
    sim_overrides: dict | None = None,
    seeds: list[int] | None = None,
    cameras=None,
) -> dict:
    """Record ``episodes`` expert bags under ``out`` (``episode_<seed>/``); returns the outcome counts.

    :param seeds: the layout seeds (default ``seed .. seed + episodes - 1``; see ``para_ros.sim.layout_region``).
    :param cameras: a ``para_ros.sim.camera_sampler.CameraRandomisation``: each episode's scene camera is drawn from
        it and sim_node is restarted with that pose and field of view, so the bag's ``/tf_static`` and
        ``camera_info`` carry the true camera.
    """
    from tqdm import tqdm  # tqdm: loaded on first use, not on import

    from para_ros.sim.yam_scene import N_ARM_JOINTS, SimConfig  # mujoco: loaded on first use, not on import

    out.mkdir(parents=True, exist_ok=True)
    graph_run = GraphRun(out / "logs", echo=echo)  # the expert node in this process joins its domain
    spec = next(s for s in graph.NODES if s.name == "sim_node")
    graph_run.start_plan([(spec, dict(sim_overrides or {}))])
    kin = YamKinematics()
    home = np.asarray(SimConfig().home_q7, dtype=np.float64)
    start_xyz = kin.fk(home[:N_ARM_JOINTS])[:3, 3]
    counts: dict[str, int] = {}
    expert = _ExpertNode()
    period = 1.0 / control_rate_hz
    try:
        for s in tqdm(
            seeds if seeds is not None else range(seed, seed + episodes),
            disable=not progress,
            desc="para-sim record",
            unit="ep",
        ):
            bag = out / f"episode_{s:06d}"
            if bag.exists():
                shutil.rmtree(bag)
            camera = cameras.sample(s) if cameras is not None else None
            if camera is not None:  # a fresh sim_node with this episode's camera (read-only parameters)
                graph_run.stop(timeout_s=5.0)
                with expert.lock:
                    expert.static_raw = None
                graph_run.start_again([(spec, {**(sim_overrides or {}), **camera.sim_node_overrides()})])
                _wait_for_static_tf(expert, graph_run)
            lay = expert.reset(s)
            layout = Layout(s, tuple(lay["cube_xy_m"]), lay["cube_yaw_rad"], tuple(lay["target_xy_m"]))
            time.sleep(0.6)  # the sim's reset hold-off (0.5 s) is over: commands are followed again
            with expert.lock:
                expert.recorder = McapRecorder(bag, RECORDED)
                if expert.static_raw is not None:
                    expert.recorder.write("/tf_static", time.time_ns(), expert.static_raw)
            plan = plan_pick_place(start_xyz, layout, SimConfig().cube_half_size_m)
            q = home.copy()
            t0 = time.monotonic()
            while True:
                t = time.monotonic() - t0
                if t > plan.duration_s + 0.5:
                    break
                T, g = plan.command_at(t + period)
                q = np.concatenate([kin.ik(T, q[:N_ARM_JOINTS]).q_rad, [g]])
                expert.send(q, period)
                time.sleep(max(0.0, t0 + (int(t / period) + 1) * period - time.monotonic()))
            time.sleep(0.3)
            with expert.lock:
                rec, expert.recorder = expert.recorder, None
                state = dict(expert.last_state or {})
            rec.close()
            outcome = "success" if state.get("success") and state.get("seed") == s else "failure"
            counts[outcome] = counts.get(outcome, 0) + 1
            task_info = {"layout": lay, "final_state": state}
            if camera is not None:
                task_info["scene_camera"] = {**camera.to_dict(), "randomisation": cameras.to_dict()}
            (bag / "para_task.json").write_text(json.dumps(task_info, indent=2))
            if outcome != "success" and not keep_failures:
                shutil.rmtree(bag)
            dead = graph_run.first_dead()
            if dead is not None:
                raise RuntimeError(f"sim_node exited with status {dead.returncode}:\n{graph_run.log_tail(dead)}")
    finally:
        expert.close()
        graph_run.stop(timeout_s=5.0)
    return counts


def _wait_for_static_tf(expert: _ExpertNode, graph_run: GraphRun, timeout_s: float = 120.0) -> None:
    """Wait until the (re)started sim_node's /tf_static (the scene camera's pose) has arrived."""
    deadline = time.monotonic() + timeout_s
    while True:
        with expert.lock:
            if expert.static_raw is not None:
                return
        dead = graph_run.first_dead()
        if dead is not None:
            raise RuntimeError(f"sim_node exited with status {dead.returncode}:\n{graph_run.log_tail(dead)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"sim_node sent no /tf_static within {timeout_s:.0f} s of its start")
        time.sleep(0.05)
