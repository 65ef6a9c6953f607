"""The ROS side of lockstep evaluation (:mod:`para_ros.sim.lockstep` holds the rules): one helper for ``sim_node``,
one for ``chunk_executor``, each created by its node when the node's parameter ``lockstep`` is true.

Wake-ups: in lockstep the simulator and the executor wake several times per camera frame (state, horizon, tick
acknowledgement, batch, chunk, its acknowledgement), and rclpy's Python executor rebuilds its wait set and polls every
waitable of the node at each wake. So in lockstep their own endpoints (these helpers', and the nodes' cameras, joint
states, clock, task state, commands and chunks) go without rclpy's default QoS event handlers, which only log a
mismatch (:mod:`para_ros.ros_io.event_handlers`; a mismatched lockstep endpoint shows anyway, as the simulator's
fault naming the answer that never came). In real time the nodes keep the default handlers.
What is published, and when in simulated time, is unchanged (docs/benchmarks.md, "Lockstep evaluation")."""

from __future__ import annotations

import time
from collections import deque

from builtin_interfaces.msg import Time as TimeMsg
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Int64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from para_ros.ros_io.event_handlers import publisher_without_default_events, subscription_without_default_events
from para_ros.sim.lockstep import (
    ChunkRelease,
    LockstepGate,
    LockstepSettings,
    chunk_ack,
    horizon_msg,
    parse_horizon,
    tick_ack,
)
from para_ros.stamps import set_stamp, stamp_to_ns

ACK_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
# Simulated time of the first instant in lockstep (ns): a fixed epoch instead of the wall clock at start, so every
# stamp, and every floating-point difference of stamps the nodes compute, is the same from one run to the next.
LOCKSTEP_EPOCH_NS = 1_000_000_000_000
# A reset from an instant less than this after the epoch first publishes /clock at epoch + this (ns): every node then
# sees the reset as a jump back of at least 0.5 s, the size at which they clear their histories (TIME_JUMP_BACK_MIN_S);
# without it a reset right after the start (or after a fault early in an episode) would repeat stamps the nodes have
# already seen, and they would drop the new frames as not newer.
RESET_HOP_NS = 1_000_000_000
TIME_BACK_NS = 500_000_000  # the executor's tick time going back this far: a reset (as the nodes' TIME_JUMP_BACK_MIN_S)


MAX_BATCH_STEPS = 100  # most steps one horizon allows (rule 7; one camera period at the default rates is 10)


def _time_msg(t_ns: int) -> TimeMsg:
    """A ``builtin_interfaces/Time`` of ``t_ns`` (for /clock and stamps)."""
    return set_stamp(TimeMsg(), t_ns)


def warn_if_unmatched(publisher, node, reader: str) -> None:
    """Say so (throttled) when ``publisher`` has no matched subscription: a reliable writer drops what it sends before
    it has matched the reader, so the message goes nowhere (DDS discovery not finished) and the simulator asks again."""
    if publisher.get_subscription_count() == 0:
        node.get_logger().warning(
            f"lockstep: {publisher.topic_name} sent before {reader}'s subscription was matched (DDS discovery not "
            "finished): it is lost, and asked for again",
            throttle_duration_sec=5.0,
        )


def batch_msg(t_ns: int, commands: list) -> JointTrajectory:
    """The executor's batch answering the horizon of ``t_ns`` (rule 7): ``commands`` are the ticks after ``t_ns`` in
    order, each the one-point ``JointTrajectory`` the tick would have sent (header stamp 0: start on receipt) or None
    (it sent nothing). One point a tick; a tick that sent nothing has an empty point."""
    msg = JointTrajectory()
    msg.header.stamp = _time_msg(t_ns)
    for command in commands:
        if command is None:
            msg.points.append(JointTrajectoryPoint())
            continue
        if stamp_to_ns(command.header.stamp) != 0 or len(command.points) != 1 or not command.points[0].positions:
            raise ValueError("a lockstep batch carries one-point trajectories stamped 0 (start on receipt)")
        if msg.joint_names and list(command.joint_names) != list(msg.joint_names):
            raise ValueError("the commands of a lockstep batch name different joints")
        msg.joint_names = list(command.joint_names)
        msg.points.append(command.points[0])
    return msg


def batch_commands(msg) -> tuple[int, list]:
    """(t ns, the ticks' commands) of a batch: each command the one-point trajectory the tick sent, or None."""
    commands = []
    for point in msg.points:
        if len(point.positions) == 0:
            commands.append(None)
            continue
        command = JointTrajectory()
        command.joint_names = list(msg.joint_names)
        command.points = [point]
        commands.append(command)
    return stamp_to_ns(msg.header.stamp), commands


class SimLockstep:
    """``sim_node``'s lockstep: steps physics by ``lockstep_step_s`` only when :class:`LockstepGate` allows it, and
    not beyond the dynamic parameter ``lockstep_run_until_s`` (an evaluator holds the simulator there while it
    hands the arm over; nothing waited for times out meanwhile). Stepping is driven by the answers themselves (each
    acknowledgement or command tries a step at once), by the node's guard condition (a reset, a changed limit) and
    by its timer (timeouts, resends, asks again, the /clock hop's hold)."""

    def __init__(self, node, p: dict):
        # Lockstep's own endpoints: no default QoS event handlers (as ExecutorLockstep's).
        quiet_pub, quiet_sub = publisher_without_default_events(), subscription_without_default_events()
        self.node = node
        # A frame's chunk is needed by the executor's latency, but before the next frame at the latest: the inference
        # node answers the newest pair, so a second frame out before the first is answered would never be answered.
        frame_period_s = min(c["period_s"] for c in node.cameras.values())
        self.settings = LockstepSettings(
            step_s=p["lockstep_step_s"],
            timeout_s=p["lockstep_timeout_s"],
            reask_s=p["lockstep_reask_s"],
            chunk_latency_s=min(float(p["lockstep_chunk_latency_s"]), frame_period_s),
            batch=bool(p["lockstep_batch"]),
            tf_period_s=float(p["lockstep_tf_period_s"]),
        )
        self.resend_s = float(p["lockstep_resend_s"])
        self._resend_after_s = self.resend_s
        self.hop_hold_s = float(p["lockstep_hop_hold_s"])
        self.gate = LockstepGate(self.settings)
        self._last_send_s = 0.0
        self._held_reported_ns: int | None = None
        self._hop_until_s: float | None = None  # wall time the /clock hop is held until (None: no hop)
        self._resend_after_hop = False  # the hop belongs to a resend (else to a reset)
        node.create_subscription(Int64MultiArray, p["lockstep_ack_topic"], self._on_ack, ACK_QOS, **quiet_sub)
        self.horizon_pub = None
        self._batched = False  # a batch was stepped through (logged once)
        self._batch_tf: list = []  # /tf of the instants stepped into the current batch, to go out with its end
        if self.settings.batch:
            self.horizon_pub = node.create_publisher(Int64MultiArray, p["lockstep_horizon_topic"], ACK_QOS, **quiet_pub)
            node.create_subscription(JointTrajectory, p["lockstep_batch_topic"], self._on_batch, ACK_QOS, **quiet_sub)

    # ---- answers
    def _on_batch(self, msg) -> None:
        try:
            self.gate.on_batch(*batch_commands(msg))
        except ValueError as exc:
            self.node.get_logger().warning(str(exc), throttle_duration_sec=1.0)
            return
        self.poll()

    def _on_ack(self, msg) -> None:
        try:
            self.gate.on_ack(msg.data)
        except ValueError as exc:
            self.node.get_logger().warning(str(exc), throttle_duration_sec=1.0)
            return
        self.poll()

    def wrap_command(self, on_command):
        """The trajectory callback for lockstep: the node's own, then the gate learns a command came."""

        def callback(msg):
            on_command(msg)
            self.gate.on_command()
            self.poll()

        return callback

    def reset(self) -> None:
        """The task was reset: simulated time restarts; the state at the new time is published at the next poll."""
        if self.gate.t_ns is not None and self.gate.t_ns < LOCKSTEP_EPOCH_NS + RESET_HOP_NS:
            self._hop(self.hop_hold_s, resend=False)
        self.gate.reset()
        self._batch_tf = []
        self._held_reported_ns = None

    def task_state_fields(self) -> dict:
        """Extra ``~/task_state`` fields: the fault that ended the episode (or ""), and whether the simulator is held
        at ``lockstep_run_until_s`` with every answer for the current instant in."""
        held = (
            self.gate.t_ns == self.node.now_ns()  # the gate is on this instant (not the one before: a state going out)
            and self.gate.ready()
            and not self.gate.frames_waiting
            and self._held_by_limit()
        )
        return {"lockstep_fault": self.gate.fault, "lockstep_held": bool(held)}

    # ---- stepping
    def _held_by_limit(self) -> bool:
        step = self.settings.step_s
        return self.node.sim.time_s + 0.5 * step > self.node.params["lockstep_run_until_s"]

    def poll(self) -> None:
        node, gate = self.node, self.gate
        wall = time.monotonic()
        if gate.fault:
            return
        if self._hop_until_s is not None:
            if wall < self._hop_until_s:
                self._publish_hop_clock()
                return
            self._hop_until_s = None
            if self._resend_after_hop:
                self._resend_same_instant()
                return
        if gate.needs_publish:  # start, or just reset: publish the state at the current instant, then wait
            node._sim_goal_s = node.sim.time_s
            self._published(node.step_and_publish(wall, frames=False), wall)
            return
        if gate.frames_pending and gate.tick_answered():  # the frames after the tick (para_ros.sim.lockstep, rule 3)
            gate.frames_published(node.publish_due_frames(gate.t_ns, wall), wall)
        if not gate.ready():
            fault = gate.check_timeout(wall) if not self._held_by_limit() else ""
            if not fault:
                self._reask_frames(gate.due_reask(wall))
            if not fault and gate.due_horizon_reask(wall):  # rule 5 for the batch: its horizon, once more
                self._publish_horizon()
                node.health.count("lockstep_horizon_reasks")
                node.get_logger().info(
                    f"lockstep: no batch yet for the ticks after t={gate.t_ns / 1e9:.3f} s: published its horizon again"
                )
            if fault:
                node.get_logger().error(fault + "; holding until ~/reset_task")
                node.health.count("lockstep_faults")
                node.health.problem("lockstep", fault)
                node._publish_task_state(node.now_ns())
            elif (
                gate.t_ns == LOCKSTEP_EPOCH_NS  # the first instant after a reset (or the start)
                and wall - self._last_send_s > self._resend_after_s
            ):
                self._hop(self.hop_hold_s * self._resend_after_s / self.resend_s, resend=True)
            return
        if self._held_by_limit():
            if gate.frames_waiting:  # a chunk still on its way: the episode is not over before it is with the executor
                self._reask_frames(gate.due_reask(wall, every_waiting=True))
                return
            if self._held_reported_ns != gate.t_ns:  # say once that everything for this instant is in
                self._held_reported_ns = gate.t_ns
                node._publish_task_state(node.now_ns())
            return
        commands = gate.batch_points or []
        if gate.batch_steps == 0 and commands and self._batch_passes_limit(len(commands)):
            return  # lockstep_run_until_s was lowered since the horizon: the batch waits until it is raised
        # Rule 7: into the batch one step at a time, as far as the chunks held allow (physics goes on while the model
        # computes, rule 4), then the step to the instant after its last tick, whose state goes out.
        while gate.batch_steps < len(commands):
            try:
                self._batch_tf += node.step_into_batch(
                    commands[gate.batch_steps], self.settings.step_s, self.settings.tf_period_steps
                )
            except RuntimeError as exc:  # the horizon let a frame or the limit fall inside the batch: never expected
                gate.fault = str(exc)
                node.get_logger().error(gate.fault + "; holding until ~/reset_task")
                node.health.count("lockstep_faults")
                node.health.problem("lockstep", gate.fault)
                node._publish_task_state(node.now_ns())
                return
            gate.batch_step_taken()
            if not gate.ready():
                return  # a chunk is needed by the next step: on when it comes
        if commands:
            if not self._batched:
                self._batched = True
                node.get_logger().info(
                    f"lockstep: ticking in batches (para_ros.sim.lockstep rule 7), the first of {len(commands) + 1} "
                    f"ticks from t={gate.t_ns / 1e9:.3f} s; /tf every {self.settings.tf_period_steps} steps"
                )
            node.health.count("lockstep_batches")
        node._sim_goal_s += self.settings.step_s
        tf, self._batch_tf = self._batch_tf, []
        self._published(node.step_and_publish(wall, frames=False, tf_before=tf), wall)

    def _reask_frames(self, stamps_ns: list[int]) -> None:
        """Rule 5: the frames whose chunk has not come, once more (nothing when ``stamps_ns`` is empty)."""
        if not stamps_ns:
            return
        node = self.node
        node.republish_frames(stamps_ns)
        node.health.count("lockstep_reasks")
        node.get_logger().info(
            f"lockstep: no chunk yet for the camera frame of t={stamps_ns[0] / 1e9:.3f} s after "
            f"{self.gate.reask_waited_s:.0f} s: published it again"
        )

    def _batch_passes_limit(self, n_ticks: int) -> bool:
        """Whether the last of a batch's ``n_ticks`` ticks after the current instant falls where
        ``lockstep_run_until_s`` holds the simulator (the goal times added up as the simulator adds them)."""
        goal, step = self.node._sim_goal_s, self.settings.step_s
        for _ in range(n_ticks):
            goal += step
        return goal + 0.5 * step > self.node.params["lockstep_run_until_s"]

    def _published(self, frame_stamps_ns: list[int], wall: float) -> None:
        self._last_send_s = wall
        self._resend_after_s = self.resend_s
        self.gate.published(self.node.now_ns(), frame_stamps_ns, wall, frames_pending=True)
        self.node.health.clear("lockstep")
        if self.horizon_pub is not None and not self._held_by_limit():
            steps = self._horizon_steps()
            if steps > 1:  # one step: nothing to batch, the tick of rule 2 is all
                step_ns = int(round(self.settings.step_s * 1e9))
                self.gate.expect_batch(self.gate.t_ns + steps * step_ns, wall)
                self._publish_horizon()

    def _publish_horizon(self) -> None:
        """The current instant's horizon (rule 7), the one the gate waits for the batch of."""
        step_ns = int(round(self.settings.step_s * 1e9))
        warn_if_unmatched(self.horizon_pub, self.node, "the executor")
        self.horizon_pub.publish(Int64MultiArray(data=horizon_msg(self.gate.t_ns, self.gate.batch_until_ns, step_ns)))

    def _horizon_steps(self) -> int:
        """Rule 7: how many steps the simulator may take from the current instant before anything can reach the
        executor: the first instant at which a camera frame is due, a chunk the simulator does not hold yet is needed
        (:meth:`LockstepGate.steps_until_blocked`, the frames due now included), or ``lockstep_run_until_s`` holds
        the simulator. Frame times and the limit are compared with a margin far above the float error of the
        simulated time (an instant near one of them ends the batch there: a batch ended early costs a round trip,
        one ended late would change the outcome)."""
        node, step = self.node, self.settings.step_s
        due_now = set(node.frames_due_now())
        next_due = []
        for cam, c in node.cameras.items():
            due = c["next_due_s"]
            if cam in due_now:  # publish_due_frames' bookkeeping of the frame going out now
                due += c["period_s"]
                if due < node.sim.time_s:
                    due = node.sim.time_s + c["period_s"]
            next_due.append(due)
        frame_due = min(next_due) if next_due else float("inf")
        limit = node.params["lockstep_run_until_s"]
        blocked = self.gate.steps_until_blocked([self.gate.t_ns] if due_now else [])
        most = min(MAX_BATCH_STEPS, blocked) if blocked is not None else MAX_BATCH_STEPS
        goal = node._sim_goal_s
        margin = 1e-7
        for k in range(1, most):
            goal += step  # as the simulator's goal time will add up
            if goal + 1e-9 + margin >= frame_due or goal + 0.5 * step + margin > limit:
                return k
        return most

    def _hop(self, hold_s: float, resend: bool) -> None:
        """``/clock`` to epoch + :data:`RESET_HOP_NS`, held there ``hold_s`` wall seconds, published again at every
        poll: rclpy keeps only the newest ``/clock`` message (depth 1, best effort), so a node busy while a hop and the
        way back arrive together would see neither, and drop the new frames as not newer. Then :meth:`poll` goes on
        with the reset's first instant or the resend (whose hold doubles with its interval)."""
        self._publish_hop_clock()
        self._hop_until_s = time.monotonic() + hold_s
        self._resend_after_hop = resend

    def _publish_hop_clock(self) -> None:
        self.node.clock_pub.publish(ClockMsg(clock=_time_msg(LOCKSTEP_EPOCH_NS + RESET_HOP_NS)))

    def _resend_same_instant(self) -> None:
        """The first instant after a reset (or the start) again, as after a new reset: after the ``/clock`` hop
        (:meth:`_hop`), time goes back, so every node clears what it holds, then the same state and frames (same
        stamps; the frames if they went out already) go out again. For a node that was not up yet (the executor
        that missed the state has no tick to answer), or that saw the frames before it saw the reset (it
        would drop them as not newer, or fail to build that observation and never try it again, and the simulator
        would wait for ever). The episode's physics has not started, so nothing of its outcome changes; the interval
        doubles each time, so a model slower than ``lockstep_resend_s`` still gets its chance."""
        node = self.node
        stamp = _time_msg(node.now_ns())
        node.clock_pub.publish(ClockMsg(clock=stamp))
        node._publish_state(stamp)
        for cam, c in node.cameras.items():
            if not self.gate.frames_pending and stamp_to_ns(c["info"].header.stamp) == self.gate.t_ns:
                node._publish_camera(cam, c, stamp)
        self._last_send_s = time.monotonic()
        self._resend_after_s *= 2.0
        node.health.count("lockstep_resends")


class ExecutorLockstep:
    """``chunk_executor``'s lockstep: one tick per joint state of a simulated instant, on exactly that state; each
    chunk kept until ``stamp + lockstep_latency_s``; every tick and every chunk acknowledged to the simulator. With a
    horizon from the simulator (rule 7), the ticks after that instant up to the horizon too, without their states,
    their commands sent in one batch."""

    def __init__(self, node, p: dict):
        self.node = node
        self.release = ChunkRelease(p["lockstep_latency_s"])
        # Lockstep's own endpoints wake the node at every batch: no default QoS event handlers to poll at each wake
        # (para_ros.ros_io.event_handlers); a mismatched endpoint shows as the simulator's fault naming the answer.
        quiet_pub, quiet_sub = publisher_without_default_events(), subscription_without_default_events()
        self.pub = node.create_publisher(Int64MultiArray, p["lockstep_ack_topic"], ACK_QOS, **quiet_pub)
        self.batch_pub = node.create_publisher(JointTrajectory, p["lockstep_batch_topic"], ACK_QOS, **quiet_pub)
        self._last_tick_ns: int | None = None
        self._horizon: tuple[int, int, int] | None = None  # the newest horizon not yet answered
        self._batch_sent: tuple[int, JointTrajectory] | None = None  # (instant, batch) of the last horizon answered
        self._kept_ns: deque[int] = deque(maxlen=64)  # stamps of the chunks kept since the last reset
        node.create_subscription(
            JointState,
            p["joint_states_topic"],
            self._on_joint_state,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
            **quiet_sub,
        )
        node.create_subscription(Int64MultiArray, p["lockstep_horizon_topic"], self._on_horizon, ACK_QOS, **quiet_sub)

    def on_chunk(self, msg) -> None:
        stamp_ns = stamp_to_ns(msg.header.stamp)
        if self._last_tick_ns is not None and stamp_ns > self._last_tick_ns:
            # Frames go out after the tick of their instant, so a chunk stamped later than the last tick is of a run
            # before a reset (answered after it): it must not act in this one.
            return
        # A second chunk of one frame (the frame was asked for again while its chunk was on its way, and predicted
        # twice) is acknowledged again but kept once: the outcome stays that of one answer per frame.
        if stamp_ns not in self._kept_ns:
            self._kept_ns.append(stamp_ns)
            self.release.add(msg, stamp_ns * 1e-9)
        self.pub.publish(Int64MultiArray(data=chunk_ack(stamp_ns)))

    def clear(self) -> None:
        self.release.clear()
        self._kept_ns.clear()
        self._horizon = None
        self._batch_sent = None  # instants restart after a reset: an old batch must not answer a new horizon

    def tick_time_ns(self) -> int | None:
        """The instant of the tick running or last run (None before the first): the stamp of the executor's
        diagnostics in lockstep, so that a report made at once within a tick (a hold of the confidence supervisor) is
        dated by that tick in batches as per tick."""
        return self._last_tick_ns

    def _on_joint_state(self, msg) -> None:
        node = self.node
        t_ns = stamp_to_ns(msg.header.stamp)
        # Every joint state is a tick, also a second one of the same instant: the simulator sends one again only for
        # the first instant after a reset (a resend, or a reset right after a fault there), and waits for its tick;
        # a command of that instant falls in the simulator's reset hold-off (reset_hold_off_s) and is ignored.
        if self._last_tick_ns is not None and t_ns < self._last_tick_ns - TIME_BACK_NS:
            self.clear()  # a reset: the chunks kept are from the old run
        self._last_tick_ns = t_ns
        # The state of this instant, whatever order the node's own joint-state subscriptions get it in.
        reader = getattr(node.backend, "reader", None)
        if reader is not None:
            reader._on_joint_state(msg)
        if node.state_watch is not None:
            node.state_watch.on_joint_state(msg)
        command = self._tick(t_ns, measured=True)
        sent = False
        if command is not None:
            try:
                node.backend.send(command)
                sent = True
            except Exception as err:  # noqa: BLE001 - acknowledge anyway: a failed send sent nothing
                node._on_tick_error(err)
        self.pub.publish(Int64MultiArray(data=tick_ack(t_ns, sent)))
        self._answer_horizon()

    def _tick(self, t_ns: int, measured: bool):
        """The tick at ``t_ns``: the chunks due handed to the core, then its command (None: nothing to send; the
        commanded pose is published). ``measured``: the state of this instant was read (else, rule 7, only its
        time: the tick does not read the joints' values)."""
        node = self.node
        now_s = t_ns * 1e-9
        for chunk in self.release.due(now_s):
            node.take_chunk(chunk, now_s)
        try:
            command = node.command_at(now_s, read_state=measured)
        except Exception as err:  # noqa: BLE001 - a failed tick sends nothing
            node._on_tick_error(err)
            return None
        if command is not None:
            node.publish_commanded_pose(command)
        return command

    def _on_horizon(self, msg) -> None:
        try:
            horizon = parse_horizon(msg.data)
        except ValueError as exc:
            self.node.get_logger().warning(str(exc), throttle_duration_sec=1.0)
            return
        if self._batch_sent is not None and self._batch_sent[0] == horizon[0]:
            # Asked again (its batch was lost on the way): the same batch once more, its ticks not run again.
            self.node.get_logger().info(f"lockstep: the horizon of t={horizon[0] / 1e9:.3f} s again: its batch again")
            warn_if_unmatched(self.batch_pub, self.node, "the simulator")
            self.batch_pub.publish(self._batch_sent[1])
            return
        self._horizon = horizon
        self._answer_horizon()

    def _batchable(self) -> bool:
        """Whether the next tick can run without the state of its instant (rule 7): the core does not read the
        measured joints' values at it, and the backend's commands fit a batch (one-point trajectories)."""
        backend = self.node.backend
        if not hasattr(backend, "make_msg") or getattr(backend, "gripper_pub", None) is not None:
            return False
        return not self.node.core.needs_measured_joints()

    def _answer_horizon(self) -> None:
        """Rule 7: once the tick at the horizon's instant is done, tick on up to the horizon (stopping at the first
        tick that needs its state) and send those ticks' commands in one batch."""
        if self._horizon is None or self._last_tick_ns != self._horizon[0]:
            return  # the state of the horizon's instant has not come yet (or the horizon is of an older instant)
        t_ns, until_ns, step_ns = self._horizon
        self._horizon = None
        commands = []
        u_ns = t_ns + step_ns
        while u_ns < until_ns and self._batchable():
            self._last_tick_ns = u_ns
            command = self._tick(u_ns, measured=False)
            commands.append(None if command is None else self.node.backend.make_msg(command))
            u_ns += step_ns
        batch = batch_msg(t_ns, commands)
        self._batch_sent = (t_ns, batch)
        warn_if_unmatched(self.batch_pub, self.node, "the simulator")
        self.batch_pub.publish(batch)
