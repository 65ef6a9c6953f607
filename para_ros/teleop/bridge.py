"""The teleoperation session's ROS node (``para_teleop``, in the ``para-teleop`` process, its own rclpy context and
threads): the leader bridge and the operator's topics.

The bridge: at ``rate_hz`` it reads the leader (the latest ``/leader/joint_states`` message, or the I2RT SDK's
leader), asks the :class:`~para_ros.teleop.leader_gate.LeaderGate` whether the leader drives the follower (the
follower's joints from ``/joint_states``), and if so publishes an ``ActionChunk`` on ``/para/action_chunk``: the
tool pose of the leader's joints (FK on the follower's model, ``grasp_site`` in ``base``) and the leader's gripper,
held for ``chunk_horizon_s`` from now. The chunk executor (run with ``chunk_min_lead_s: 0``: the pose is the
leader's now, not a prediction from a past frame) takes it like any chunk: its checks, IK seeded with its previous
solution, the safety filter and the command backend; when chunks stop (the gate holds, or this process dies) the
follower holds at the last pose. Why a pose and not the joints: the executor's one path (chunk -> IK -> safety
filter -> backend) stays the only way a command reaches the arm, for policies and people alike.

The operator: ``~/prompt`` (JSON, latched: ``{"run", "phase": "idle" | "recording", "episode"}``), ``~/feedback``
(every command answered), ``~/command`` (:mod:`para_ros.teleop.episodes`), and ``~/leader_state`` (JSON: the gate's
state, why it holds, its last transition; sent on every change and once a second).
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np

from para_ros.ros_io.spin import spin_until
from para_ros.teleop.episodes import EpisodeDesk, parse_command
from para_ros.teleop.leader_gate import GateDecision, LeaderConfig, LeaderGate, LeaderReading, LeaderState
from para_ros.teleop.leaders import LEADER_TOPIC, LeaderMismatch, leader_joints

NODE_NAME = "para_teleop"


class TeleopNode:
    """See the module docstring.

    :param desk: the session's :class:`EpisodeDesk` (commands from ``~/command`` go to it).
    :param arm: the follower's :class:`~para_ros.robot.arm.ArmDescription`.
    :param leader: ``"topic"`` or an object with ``read() -> (q (n,), gripper)`` (the SDK's leader).
    :param leader_topic: the topic leader's ``JointState`` topic.
    :param leader_joint_names: the names the topic leader gives the follower's joints (default: the follower's).
    :param gate: the gate's thresholds.
    :param rate_hz: bridge ticks (and chunks) per second.
    :param chunk_horizon_s: how long each chunk holds the leader's pose (s).
    :param domain_id: the ROS domain of the session.
    :param follower_gripper_name: the follower's gripper in ``/joint_states`` ("": not there, as on a robot whose
        gripper has its own controller).
    """

    def __init__(
        self,
        desk: EpisodeDesk,
        arm,
        leader="topic",
        leader_topic: str = LEADER_TOPIC,
        leader_joint_names: tuple[str, ...] = (),
        gate: LeaderConfig | None = None,
        rate_hz: float = 50.0,
        chunk_horizon_s: float = 0.1,
        domain_id: int | None = None,
        follower_gripper_name: str = "gripper",
    ):
        import uuid

        import rclpy  # rclpy: loaded on first use, not on import
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        from para_msgs.msg import ActionChunk
        from para_ros.execution.control_loop import FixedRateLoop
        from para_ros.robot.arm_kinematics import ArmKinematics
        from para_ros.ros_io.topic_backends import JOINT_STATE_QOS, JointStateReader

        if not (1.0 <= rate_hz <= 1000.0 and 0.02 <= chunk_horizon_s <= 1.0):
            raise ValueError(
                f"rate_hz={rate_hz} must be in [1, 1000] Hz and chunk_horizon_s={chunk_horizon_s} in [0.02, 1] s"
            )
        self.desk = desk
        self.arm = arm
        self.kin = ArmKinematics(arm.model)
        self.gate = LeaderGate(gate or LeaderConfig(), arm.limits.joint_lower_rad, arm.limits.joint_upper_rad)
        self.leader = leader
        self.leader_names = tuple(leader_joint_names) or tuple(arm.model.joint_names)
        self.horizon_s = float(chunk_horizon_s)
        self.run_id = uuid.uuid4().hex[:12]
        self.String, self.ActionChunk = String, ActionChunk
        self.context = rclpy.Context()
        rclpy.init(
            args=[],
            context=self.context,
            signal_handler_options=SignalHandlerOptions.NO,
            **({} if domain_id is None else {"domain_id": int(domain_id)}),
        )
        self.node = n = rclpy.create_node(NODE_NAME, context=self.context)
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.prompt_pub = n.create_publisher(String, "~/prompt", latched)
        self.feedback_pub = n.create_publisher(String, "~/feedback", QoSProfile(depth=50))
        self.state_pub = n.create_publisher(String, "~/leader_state", QoSProfile(depth=10))
        self.chunk_pub = n.create_publisher(ActionChunk, "/para/action_chunk", QoSProfile(depth=10))
        n.create_subscription(String, "~/command", lambda m: self.on_text(m.data, "topic"), QoSProfile(depth=10))
        self.follower = JointStateReader(n, "/joint_states", tuple(arm.model.joint_names), follower_gripper_name)
        self._lock = threading.Lock()
        self._reading: LeaderReading | None = None
        self.leader_problem = ""  # a leader that does not fit (wrong joints): said on feedback, every 2 s at most
        self._problem_said_s = 0.0
        self.chunks_sent = 0
        self.leader_messages = 0
        if leader == "topic":
            n.create_subscription(JointState, leader_topic, self._on_leader, JOINT_STATE_QOS)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self._spin = threading.Thread(target=self._spin_forever, name=NODE_NAME, daemon=True)
        self._spin.start()
        self._decision: GateDecision | None = None
        self._state_said_s = 0.0
        self.loop = FixedRateLoop(rate_hz, self._tick, name="para_teleop_bridge", on_error=self._on_tick_error)
        self.loop.start()

    # ---- threads ----------------------------------------------------------------------------------------------
    def _spin_forever(self) -> None:
        spin_until(self.executor, lambda: not self.context.ok(), period_s=0.1, on_error="continue")

    def _on_tick_error(self, err: BaseException) -> None:
        self.say_once(f"bridge tick failed: {type(err).__name__}: {err}")

    def now_s(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    # ---- leader -------------------------------------------------------------------------------------------------
    def _on_leader(self, msg) -> None:
        """A leader ``JointState``: kept when it fits the follower; a bad one is said, never raised."""
        self.leader_messages += 1
        try:
            q, g = leader_joints(msg.name, msg.position, self.leader_names)
        except LeaderMismatch as exc:
            with self._lock:
                self.leader_problem = str(exc)
            self.say_once(f"leader refused: {exc}")
            return
        with self._lock:
            self.leader_problem = ""
            self._reading = LeaderReading(q, g, self.now_s())

    def _read_leader(self) -> LeaderReading | None:
        if self.leader == "topic":
            with self._lock:
                return self._reading
        try:
            q, g = self.leader.read()
        except Exception as exc:  # noqa: BLE001 - a failing read is a lost leader, not a dead bridge
            self.say_once(f"reading the leader failed: {type(exc).__name__}: {exc}")
            return None
        return LeaderReading(q, g, self.now_s())

    def _tick(self) -> None:
        now = self.now_s()
        measured = self.follower.read()
        before = self.gate.state
        decision = self.gate.update(self._read_leader(), None if measured is None else measured[0], now)
        self._decision = decision
        if decision.q_target_rad is not None:
            gripper = decision.gripper
            if not np.isfinite(gripper):  # a leader without a gripper: the follower's stays where it is
                gripper = measured[1] if measured is not None and np.isfinite(measured[1]) else 1.0
            self.chunk_pub.publish(self._chunk(decision.q_target_rad, float(np.clip(gripper, 0.0, 1.0)), now))
            self.chunks_sent += 1
        if decision.state is not before or time.monotonic() - self._state_said_s > 1.0:
            self._say_state(decision, changed=decision.state is not before)

    def _chunk(self, q_rad: np.ndarray, gripper: float, now_s: float):
        """The leader's pose as an ActionChunk: FK of ``q_rad`` held from now for the chunk horizon."""
        from para_core.model.rotations import matrix_to_quaternion
        from para_ros.execution.chunk import Chunk
        from para_ros.ros_io.chunk_msg import chunk_to_msg

        T = self.kin.fk(q_rad)  # (4, 4) T_base_tool
        position = T[:3, 3]
        quat = matrix_to_quaternion(T[:3, :3])  # (4,) x, y, z, w
        chunk = Chunk(
            stamp_s=now_s,
            time_from_stamp_s=np.array([0.0, self.horizon_s]),
            positions_m=np.stack([position, position]),  # (2, 3)
            quats_xyzw=np.stack([quat, quat]),  # (2, 4)
            gripper=np.array([gripper, gripper]),
            confidence=np.ones(2),
            frame_id=self.arm.model.world_frame,
            tool_frame_id=self.arm.model.tool_site,
            model_id="teleop_leader",
        )
        return chunk_to_msg(chunk, stamp_ns=int(round(now_s * 1e9)))

    def _say_state(self, decision: GateDecision, changed: bool) -> None:
        self._state_said_s = time.monotonic()
        with self._lock:
            problem = self.leader_problem
        info = {
            "state": decision.state.value,
            "reason": problem or decision.reason,
            "last_transition": self.gate.last_transition,
            "jumps": self.gate.jumps,
            "clamped_ticks": self.gate.clamped_ticks,
            "chunks_sent": self.chunks_sent,
        }
        self.state_pub.publish(self.String(data=json.dumps(info)))
        if changed:
            print(
                f"  leader: {decision.state.value}"
                + (f": {decision.reason}" if decision.reason else "")
                + f"  [{self.gate.last_transition}]",
                flush=True,
            )

    def leader_stats(self) -> dict:
        """What the gate did so far (for an episode's metadata)."""
        return {
            "state": self.gate.state.value,
            "jumps": self.gate.jumps,
            "clamped_ticks": self.gate.clamped_ticks,
            "chunks_sent": self.chunks_sent,
            "transitions": list(self.gate.transitions[-20:]),
        }

    @property
    def following(self) -> bool:
        return self.gate.state is LeaderState.FOLLOWING

    # ---- operator ---------------------------------------------------------------------------------------------
    def on_text(self, text: str, source: str) -> None:
        try:
            _, message = self.desk.offer(parse_command(text, source))
        except ValueError as exc:
            message = f"refused: {exc}"
        self.feedback(message)

    def feedback(self, message: str) -> None:
        """``message`` on ``~/feedback`` and this terminal."""
        self.feedback_pub.publish(self.String(data=message))
        print(f"  operator: {message}", flush=True)

    def say_once(self, message: str, every_s: float = 2.0) -> None:
        """A repeated problem on ``~/feedback`` and the terminal, at most every ``every_s``."""
        now = time.monotonic()
        if now - self._problem_said_s >= every_s:
            self._problem_said_s = now
            self.feedback(message)

    def prompt(self, phase: str, episode: int, **info) -> None:
        self.prompt_pub.publish(
            self.String(data=json.dumps({"run": self.run_id, "phase": phase, "episode": episode, **info}))
        )

    def close(self) -> None:
        self.loop.stop()
        if self.context.ok():
            self.context.try_shutdown()
        self._spin.join(timeout=5.0)
        try:
            self.node.destroy_node()
        except Exception:  # noqa: BLE001
            pass
