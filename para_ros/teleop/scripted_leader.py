"""A scripted leader for ``para-teleop --robot sim``: the person at the leader arm, replaced by the simulator's scripted
pick-and-place expert (:mod:`para_ros.sim.expert`, the one ``para-sim demos`` / ``para-sim record`` use), so the
whole teleoperated recording runs here.

    para-teleop --robot sim --scripted-leader 0 ...               # started by para-teleop, in its ROS domain
    python -m para_ros.teleop.scripted_leader --seed 0            # or beside it, in the same ROS_DOMAIN_ID

For each ``idle`` prompt of episode k (``/para_teleop/prompt``) it does what the person would:

1. resets the scene (the executor held with ``/chunk_executor/stop``, then ``task_seed`` = seed + k and
   ``/sim_node/reset_task``: arm home, cube and pad at that layout), hands the arm back (``/chunk_executor/resume``,
   from the measured joints), and holds the leader where the follower is, so the leader gate syncs;
2. says ``start`` on ``/para_teleop/command`` and, once the episode records, moves the leader along the expert's plan:
   ``sensor_msgs/JointState`` on ``/leader/joint_states`` at ``rate_hz`` (joint1..joint6 from the YAM's IK of the
   plan's tool pose, seeded with the previous solution, and the gripper);
3. after the plan, marks the episode from the simulator's own judgement (``/sim_node/task_state``,
   :class:`para_ros.sim.pick_place.EpisodeMonitor`): ``K success``, or ``K failure CAUSE``.

Between episodes it keeps sending the leader's last pose (a leader arm does not vanish between episodes).
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import numpy as np

from para_ros.ros_io.spin import spin_until
from para_ros.sim.pick_place import EpisodeMonitor, Judgement, check_seed
from para_ros.teleop.leaders import LEADER_TOPIC

TELEOP_NODE = "/para_teleop"


class ScriptedLeader:
    """The leader's node (own rclpy context, spun in a thread); :meth:`run` answers prompts until stopped."""

    def __init__(self, seed: int, rate_hz: float = 50.0, settle_s: float = 0.5):
        import rclpy  # rclpy: loaded on first use, not on import
        from rcl_interfaces.srv import SetParameters
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from std_srvs.srv import Trigger

        from para_ros.robot.yam_ik import YamKinematics
        from para_ros.ros_io.topic_backends import JOINT_STATE_QOS, JointStateReader
        from para_ros.sim.yam_scene import ARM_JOINT_NAMES

        check_seed(seed)
        self.seed, self.period_s, self.settle_s = seed, 1.0 / rate_hz, settle_s
        self.String, self.JointState = String, JointState
        self.names = list(ARM_JOINT_NAMES)
        self.kin = YamKinematics()
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = n = rclpy.create_node("para_scripted_leader", context=self.context)
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.leader_pub = n.create_publisher(JointState, LEADER_TOPIC, JOINT_STATE_QOS)
        self.command_pub = n.create_publisher(String, f"{TELEOP_NODE}/command", QoSProfile(depth=10))
        self.params = n.create_client(SetParameters, "/sim_node/set_parameters")
        self.reset = n.create_client(Trigger, "/sim_node/reset_task")
        self.executor_clients = {s: n.create_client(Trigger, f"/chunk_executor/{s}") for s in ("stop", "resume")}
        self.follower = JointStateReader(n, "/joint_states", tuple(self.names), "gripper")
        self._lock = threading.Lock()
        self.prompt: dict | None = None
        self.states: list[dict] = []
        self.gate_state = ""
        n.create_subscription(String, f"{TELEOP_NODE}/prompt", self._on_prompt, latched)
        n.create_subscription(String, f"{TELEOP_NODE}/leader_state", self._on_gate, QoSProfile(depth=10))
        n.create_subscription(String, "/sim_node/task_state", self._on_state, QoSProfile(depth=200))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self._spin = threading.Thread(target=self._spin_forever, daemon=True)
        self._spin.start()
        self.q: np.ndarray | None = None  # (6,) the leader's joints now
        self.gripper = 1.0

    def _spin_forever(self) -> None:
        spin_until(self.executor, lambda: not self.context.ok(), period_s=0.1, on_error="continue")

    def _on_prompt(self, msg) -> None:
        with self._lock:
            self.prompt = json.loads(msg.data)

    def _on_gate(self, msg) -> None:
        with self._lock:
            self.gate_state = json.loads(msg.data).get("state", "")

    def _on_state(self, msg) -> None:
        with self._lock:
            self.states.append(json.loads(msg.data))

    def _publish(self) -> None:
        if self.q is None:
            return
        msg = self.JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = [*self.names, "gripper"]
        msg.position = [float(v) for v in self.q] + [float(self.gripper)]
        self.leader_pub.publish(msg)

    def _hold(self, seconds: float, stop: threading.Event) -> None:
        """Send the leader's current pose for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end and not stop.is_set():
            self._publish()
            time.sleep(self.period_s)

    def _call(self, name: str) -> None:
        from para_ros.ros_io.task_services import call_service

        answer = call_service(self.executor_clients[name], None, 30.0, resend_after_s=5.0)
        if not answer.success:
            raise RuntimeError(f"/chunk_executor/{name} refused: {answer.message}")

    def _wait_prompt(self, phase: str, episode: int | None, stop: threading.Event) -> dict | None:
        while not stop.is_set():
            with self._lock:
                p = self.prompt
            if p is not None and p["phase"] == phase and (episode is None or p["episode"] == episode):
                return p
            self._publish()
            time.sleep(self.period_s)
        return None

    def episode(self, k: int, stop: threading.Event) -> str:
        """Lead episode ``k`` (module docstring); returns the mark sent."""
        from para_ros.ros_io.task_services import reset_task
        from para_ros.sim.expert import plan_pick_place
        from para_ros.sim.pick_place import Layout
        from para_ros.sim.yam_scene import SimConfig

        layout_seed = self.seed + k
        self._call("stop")  # the executor holds its last command while the scene is reset
        lay = reset_task(self.params, self.reset, layout_seed)
        # Hand the arm back as soon as it is measured home, within the simulator's reset hold-off (0.5 s): the
        # executor re-seeds there; later, the held command would pull the arm back to where the episode before ended.
        home = np.asarray(SimConfig().home_q7[: len(self.names)])
        deadline = time.monotonic() + 5.0
        while not stop.is_set() and time.monotonic() < deadline:
            measured = self.follower.read()
            if measured is not None and np.abs(measured[0] - home).max() < 0.02:
                break
            time.sleep(0.01)
        self._call("resume")
        with self._lock:
            self.gate_state = ""  # a state heard from now on is about the leader at the follower
        # bring the leader to the follower until the gate lets it lead, as a person would
        for _ in range(20):
            measured = self.follower.read()
            self.q, self.gripper = measured[0].copy(), 1.0
            self._hold(0.5, stop)
            with self._lock:
                if self.gate_state == "following":
                    break
        self._hold(self.settle_s, stop)
        self.command_pub.publish(self.String(data="start"))
        if self._wait_prompt("recording", k, stop) is None:
            return ""
        with self._lock:
            self.states = []
        layout = Layout(layout_seed, tuple(lay["cube_xy_m"]), lay["cube_yaw_rad"], tuple(lay["target_xy_m"]))
        start_xyz = self.kin.fk(self.q)[:3, 3]
        plan = plan_pick_place(start_xyz, layout, SimConfig().cube_half_size_m)
        t0 = time.monotonic()
        while not stop.is_set():
            t = time.monotonic() - t0
            if t > plan.duration_s + 0.5:
                break
            T, g = plan.command_at(t)
            self.q, self.gripper = self.kin.ik(T, self.q).q_rad, g
            self._publish()
            time.sleep(max(0.0, t0 + (int(t / self.period_s) + 1) * self.period_s - time.monotonic()))
        self._hold(1.0, stop)  # the follower catches up, the cube settles
        monitor = EpisodeMonitor()
        with self._lock:
            states = [s for s in self.states if s.get("seed") == layout_seed]
        for st in states:
            monitor.update(Judgement(st["state"], st["place_error_m"], st["cube_height_m"], st["held"]))
        outcome = monitor.outcome()
        mark = f"{k} success" if outcome == "success" else f"{k} failure {outcome}"
        self.command_pub.publish(self.String(data=mark))
        return mark

    def run(self, stop: threading.Event, episodes: int = 0) -> None:
        """Lead every episode para-teleop opens (at most ``episodes``; 0: no limit) until ``stop`` is set."""
        done = 0
        while not stop.is_set() and (episodes == 0 or done < episodes):
            p = self._wait_prompt("idle", None, stop)
            if p is None:
                return
            k = int(p["episode"])
            try:
                mark = self.episode(k, stop)
            except RuntimeError as exc:
                print(f"scripted leader: episode {k}: {exc}", flush=True)
                time.sleep(1.0)
                continue
            print(f"scripted leader: {mark}", flush=True)
            done += 1
            self._wait_prompt_change(k, stop)

    def _wait_prompt_change(self, k: int, stop: threading.Event) -> None:
        """Keep the leader where it is until para-teleop has moved past episode ``k``."""
        while not stop.is_set():
            with self._lock:
                p = self.prompt
            if p is not None and not (p["phase"] == "recording" and p["episode"] == k):
                return
            self._publish()
            time.sleep(self.period_s)

    def close(self) -> None:
        if self.context.ok():
            self.context.try_shutdown()
        self._spin.join(timeout=5.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m para_ros.teleop.scripted_leader", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seed", type=int, default=0, help="layout seed of episode 0 (episode k: seed + k)")
    parser.add_argument("--episodes", type=int, default=0, help="lead at most this many episodes (0: no limit)")
    parser.add_argument("--rate", type=float, default=50.0, help="leader states per second (default 50)")
    args = parser.parse_args(argv)
    from para_ros.dds_env import apply_loopback_dds_env
    from para_ros.deploy.graph_run import SignalStop

    apply_loopback_dds_env(pick_domain=False)  # the caller's ROS_DOMAIN_ID: para-teleop's
    signals = SignalStop("stopped by a signal")
    leader = ScriptedLeader(args.seed, args.rate)
    try:
        leader.run(signals.event, args.episodes)
    finally:
        leader.close()
        signals.restore()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
