"""The chunk executor node: PARA action chunks in, safe joint (or tool pose) commands for an arm out (the YAM by
default; any arm description via ``yam_config``).

ROS I/O only (subscriptions, publishers, services, parameters, TF, messages): the executor's logic is
:class:`para_ros.execution.executor_core.ExecutorCore`, what it reports :mod:`para_ros.execution.executor_diagnostics`,
its parameters :mod:`para_ros.nodes.executor_parameters` (read by :mod:`para_ros.execution.config_from_parameters`).

Subscribes to ``para_msgs/ActionChunk`` (``chunk_topic``), runs :class:`para_ros.execution.executor_core.ExecutorCore`
at ``control_rate_hz`` in its own thread (a fixed-rate loop, so a flood of chunks cannot starve it) on the ROS clock
(``use_sim_time`` honoured; ticks wait until the clock is non-zero), and sends each command through one command
backend (parameter ``backend``), looked up by name in :mod:`para_ros.nodes.command_backends`, where each backend
registers its parameters and constructor; the shipped ones:

* ``joint_trajectory``: ``trajectory_msgs/JointTrajectory`` on ``joint_trajectory_topic`` (ros2_control's joint
  trajectory controller, the project's simulated arm); joints read from ``joint_states_topic``. The gripper goes
  inside the trajectory under ``gripper_joint_name`` (the simulated arm), or, with ``gripper_joint_name: ""``, as
  ``std_msgs/Float64`` (0 closed .. 1 open) on ``gripper_command_topic`` (a real joint_trajectory_controller rejects a
  trajectory naming a joint it does not own, so the arm's trajectory carries the arm joints only);
* ``i2rt_sdk``: the I2RT SDK (``get_yam_robot(channel=sdk_channel)``, or its MuJoCo sim with ``sdk_sim``). The
  executor then owns the arm, so it also publishes ``/joint_states`` (on ``joint_states_topic``) at
  ``state_publish_rate_hz`` and, with ``publish_tf``, the arm's ``/tf`` (``base`` .. ``gripper``, ``grasp_site``,
  the wrist camera's optical frame at the mount of ``config/yam.yaml``) by forward kinematics of the joints read;
* ``pose``: ``geometry_msgs/PoseStamped`` tool targets on ``pose_command_topic`` (+ ``std_msgs/Float64`` gripper).

Services ``~/stop`` and ``~/resume`` (``std_srvs/Trigger``): stop drops every chunk and, from the next tick on, every
command holds the last commanded position; resume accepts chunks again from the measured joints. ``~/engage`` and
``~/disengage`` (``std_srvs/Trigger``) are the same two actions under the names of a hand-over: with ``auto_engage:
false`` the node starts DISENGAGED and publishes NOTHING on its command topics (the arm stays with its driver) until
``~/engage``, which hands the arm to the policy from the measured joints (no jump); ``~/disengage`` holds at once.
``auto_engage: true`` follows chunks from the start (the default is false, in the table and config/executor.yaml; the
launchers set true for the simulator, and for a real arm only when asked: ``--engage`` / ``engage:=true``).
``~/resume`` also ends a hold of the confidence supervisor (``confidence_supervisor: true``, docs/confidence.md),
which slows the arm for uncertain chunks and holds it for very uncertain ones, naming why on ``/diagnostics``
(``confidence_problem``; the state: ``following_slowly`` / ``holding_uncertain``).
Publishes ``/diagnostics`` (``diagnostic_msgs/DiagnosticArray``: the executor's ``state``
(:class:`~para_ros.execution.executor_state.ExecutorState`) with every change of it named (``last_transition``,
``recent_transitions``), its detail ``activity`` (what the latest tick did: ``tracking``, ``hold_stale``, ...; the
headline is ``state (activity)``), counters, the latest problem named, the tick
time of the latest command and when the latest chunk was accepted, on the node's clock) and the
commanded tool pose (``PoseStamped``, FK of each command, stamped with the time it is meant for: tick + the lookahead
in force, ``command_lookahead_s`` or more under ``chunk_min_lead_s``) on ``commanded_pose_topic`` for rviz.

A bad chunk never crashes the node and never moves the arm: it is rejected whole, with a throttled warning and a
diagnostics status naming the problem. One kind of chunk is kept in part: a jump between two steps faster than
``max_implied_speed_m_s`` (the policy's argmax switching places) is rejected while the arm still follows an earlier
chunk, and cut before the jump when the arm would otherwise hold (``implausible_speed: truncate_when_idle``, counted
as ``chunks_truncated``), so the arm moves on and the next observation differs.
Parameter defaults: ``config/executor.yaml``; limits: ``config/yam.yaml``.

Lost feedback: when the arm's state is older than ``joint_state_timeout_s`` (default 0.2 s, well under the real
YAM's 400 ms motor timeout), the node sends NO command at all (not a hold: see
:mod:`para_ros.execution.executor_core`, step 0), drops its chunks, logs an error (throttled, 1 s) and reports the
problem ``joint_state`` on ``/diagnostics`` (ERROR) until a fresh state comes; commands resume only after that AND a
new chunk, from the freshly measured joints (a loss before the first command ever sent needs no chunk). The state's
time is when the last complete ``JointState`` (every arm joint, and the gripper when ``gripper_joint_name`` is set,
merged by name as the backends read it) arrived on ``joint_states_topic`` (topic backends, the node's clock), or
when the SDK read last succeeded (``i2rt_sdk``: the SDK's own reading, which this node cannot date further).

Time jumps (``use_sim_time`` and a ``/clock`` that goes back: a simulator reset, a bag loop): the node registers an
rclpy clock jump callback (a backward jump of ``TIME_JUMP_BACK_MIN_S`` = 0.5 s or more, and a switch of time source;
smaller steps back are a clock publisher's jitter, see :mod:`para_ros.execution.executor_core`). Before the new time is
set it tells the
core (:meth:`ExecutorCore.clock_jumped_back`: the timeline and every old-clock time dropped) and forgets when the joint
states were heard; the executor then sends nothing until a complete joint state arrives on the new clock, re-seeds
from it and holds there until a new chunk (chunks stamped on the old clock are refused as from the future). Why the
callback and not a comparison of consecutive ``now()`` values: the times the executor uses come from two threads (the
control loop's ticks, the chunk and joint-state callbacks) and interleave, so a comparison would need a tolerance that
misses small jumps or reports false ones under load, and it would notice a jump only at its next tick, after a chunk
callback may already have met the old timeline on the new clock; rcl compares each ``/clock`` with the previous one
and calls the pre-jump callback in the executor thread before any callback can see the new time. (The core's tick
still checks its own times too, for a jump nobody announced, e.g. from a caller without rclpy.) Diagnostics:
``time_jumps_back``, ``last_time_jump``; the log says it at WARN.

Lockstep (``lockstep: true``, against the simulator's lockstep mode, :mod:`para_ros.sim.lockstep`): no fixed-rate
loop; one tick per joint state of a new simulated instant, chunks held for ``lockstep_latency_s`` of simulated time,
ticks and chunks acknowledged to the simulator (:class:`para_ros.nodes.lockstep_hooks.ExecutorLockstep`); with the
simulator's horizons (rule 7), the ticks up to each horizon in one batch.

Run: ``python -m para_ros.nodes.chunk_executor --ros-args --params-file config/executor.yaml -p backend:=i2rt_sdk``.
"""

from __future__ import annotations

import dataclasses
import sys
import time

from geometry_msgs.msg import PoseStamped
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from para_msgs.msg import ActionChunk
from para_ros.execution.config_from_parameters import build_executor_config, parse_joint_names
from para_ros.execution.control_loop import FixedRateLoop, raise_ros_thread_priority
from para_ros.execution.executor_core import JOINT_STATE_PROBLEM, TIME_JUMP_BACK_MIN_S, ExecutorCore
from para_ros.execution.executor_diagnostics import (
    ActivityChanges,
    control_loop_values,
    diagnostic_summary,
    headline,
    status_values,
)
from para_ros.execution.executor_state import HOLDS_UNCERTAIN, SLOWED, ExecutorState, TickActivity
from para_ros.execution.joint_state_watch import JointStateWatch
from para_ros.nodes.command_backends import BackendContext, command_backend
from para_ros.nodes.executor_parameters import NODE_NAME, parameter_table
from para_ros.nodes.health import HealthReporter
from para_ros.nodes.lockstep_hooks import ExecutorLockstep
from para_ros.nodes.runtime import run_node, time_jump_text
from para_ros.robot.yam import load_yam_config
from para_ros.robot.yam_frames import YamFrames
from para_ros.ros_io.chunk_msg import chunk_from_msg
from para_ros.ros_io.event_handlers import publisher_without_default_events, subscription_without_default_events
from para_ros.ros_io.sdk_state import SdkStatePublisher
from para_ros.ros_io.topic_backends import JOINT_STATE_QOS, pose_stamped

CONFIDENCE_STATES = SLOWED | HOLDS_UNCERTAIN  # the confidence supervisor's states: their changes are logged


class ChunkExecutorNode(Node):
    """See the module docstring."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self.parameters = parameter_table()  # with every command backend registered now
        self.params = p = self.parameters.declare(self)
        self.backend_spec = command_backend(p["backend"])
        self.arm = load_yam_config(p["yam_config"] or None)  # any arm description; the YAM's by default
        if p["calibration_file"]:  # the calibrated wrist mount replaces the CAD one
            # OpenCV (the file's board): loaded only with a calibration_file
            from para_ros.calibration.consumers import wrist_mount

            self.arm = dataclasses.replace(
                self.arm, wrist_camera=wrist_mount(p["calibration_file"], self.arm.wrist_camera)
            )
        self.arm_joint_names = parse_joint_names(p["arm_joint_names"], self.arm.model.joint_names)
        # checks the description against its model: a missing joint, site or body, or a limit outside the model's
        # range, stops the node here (ValueError naming the field), before anything is sent
        self.core = ExecutorCore(build_executor_config(p, self.arm), self.arm)
        self.world_frame = self.arm.model.world_frame
        self.backend = self.backend_spec.build(
            BackendContext(self, self.arm, self.arm_joint_names, p["joint_states_topic"], self.world_frame),
            {param.name: p[param.name] for param in self.backend_spec.parameters},
        )
        self.state_watch = None  # topic backends: when the joint state last arrived (a direct read is dated here)
        if not self.backend_spec.reads_arm_directly:
            gripper = (p["gripper_joint_name"],) if p["gripper_joint_name"] else ()
            self.state_watch = JointStateWatch(self.arm_joint_names + gripper, self.now_s)
            self.state_watch_sub = self.create_subscription(
                JointState,
                p["joint_states_topic"],
                self.state_watch.on_joint_state,
                JOINT_STATE_QOS,
                **(subscription_without_default_events() if p["lockstep"] else {}),
            )
        self._state_source = (
            f"{p['joint_states_topic']}" if self.state_watch is not None else f"the {self.backend.name} read"
        )
        self.activity_changes = ActivityChanges(self._state_source)  # feedback-loss log lines, reports at once
        self.state_publisher = None
        if self.backend_spec.reads_arm_directly:  # the executor owns the arm: nobody else can publish its state
            frames = None
            if p["publish_tf"]:
                m = self.arm.model
                frames = YamFrames(self.arm.wrist_camera, m.arm_type, m.gripper_type, m.tool_site)
            self.state_publisher = SdkStatePublisher(
                self,
                self.backend.read_joints,
                p["joint_states_topic"],
                self.arm_joint_names,
                p["gripper_joint_name"],
                p["state_publish_rate_hz"],
                frames,
            )
        self._last_report = None
        self._last_problem_diag_s = 0.0
        self.health = HealthReporter(
            self,
            f"{NODE_NAME}: {self.get_name()}",
            hardware_id=f"{self.arm.name} ({self.backend.name})",
            period_s=1.0 / p["diagnostics_rate_hz"],
            source=self._diagnostic_source,
        )
        # Depth 100 (1 s at 100 Hz): a recorder or a briefly busy subscriber still gets every command.
        # Lockstep: the node wakes for every batch, and rclpy polls each default QoS event handler at every wake.
        quiet_pub = publisher_without_default_events() if p["lockstep"] else {}
        self.pose_pub = self.create_publisher(PoseStamped, p["commanded_pose_topic"], 100, **quiet_pub)
        self.chunk_sub = self.create_subscription(
            ActionChunk,
            p["chunk_topic"],
            self._on_chunk,
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
            **(subscription_without_default_events() if p["lockstep"] else {}),
        )
        self.stop_srv = self.create_service(Trigger, "~/stop", self._on_stop)
        self.resume_srv = self.create_service(Trigger, "~/resume", self._on_resume)
        self.engage_srv = self.create_service(Trigger, "~/engage", self._on_engage)
        self.disengage_srv = self.create_service(Trigger, "~/disengage", self._on_disengage)
        self.parameters.on_set(self, self._apply_parameters)
        # A backward jump of the node's clock, and a change of time source (module docstring: Time jumps).
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=None, min_backward=Duration(seconds=-TIME_JUMP_BACK_MIN_S), on_clock_change=True),
            pre_callback=self._before_time_jump,
            post_callback=self._after_time_jump,
        )
        if p["control_thread_priority"] > 0:
            sys.setswitchinterval(0.001)  # the GIL changes hands within 1 ms when the control thread wakes
        self.loop = FixedRateLoop(
            p["control_rate_hz"],
            self._tick,
            name="chunk_executor_control",
            on_error=self._on_tick_error,
            priority=p["control_thread_priority"],
        )
        self.lockstep = None
        if p["lockstep"]:  # ticks come from the simulator's instants, not from the loop
            self.lockstep = ExecutorLockstep(self, p)
            self.health.stamp_ns = self.lockstep.tick_time_ns  # a hold reported at once: at the tick's instant
        else:
            self.loop.start()  # before the ROS thread's own change: a new thread inherits its creator's scheduler
            self.loop.scheduler_applied.wait(5.0)
        self.ros_thread_scheduler = raise_ros_thread_priority(p["control_thread_priority"], self.loop.scheduler)
        self.get_logger().info(
            f"chunk executor up: backend={self.backend.name}, {p['control_rate_hz']:.0f} Hz, blend="
            f"{p['blend_mode']}, chunks on {p['chunk_topic']}, {self.backend.describe()}"
            + (
                f"; publishing {p['joint_states_topic']} at {p['state_publish_rate_hz']:g} Hz"
                + (" and /tf" if p["publish_tf"] else "")
                if self.state_publisher
                else ""
            )
        )

    def now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # ---- callbacks ------------------------------------------------------------------------------------------

    def _on_chunk(self, msg) -> None:
        if self.lockstep is not None:
            self.lockstep.on_chunk(msg)  # kept until its simulated latency has passed, then take_chunk
        else:
            self.take_chunk(msg, self.now_s())

    def take_chunk(self, msg, now_s: float) -> None:
        """Hand a chunk message to the core at ``now_s`` (log and report a rejection)."""
        before = self.core.state
        try:
            chunk = chunk_from_msg(msg)
            accepted, text = self.core.add_chunk(chunk, now_s)
        except Exception as err:  # noqa: BLE001 - a bad message must never take the node down
            accepted, text = False, f"chunk could not be read: {type(err).__name__}: {err}"
            self.core.reject_unreadable_chunk(text)
        after = self.core.state
        if after is not before and CONFIDENCE_STATES & {before, after}:  # the supervisor slowed, held or let go
            problem, transition = self.core.status.confidence_problem, self.core.status.last_transition
            if after in CONFIDENCE_STATES:
                self.get_logger().warning(f"{transition}: {problem}" if problem else transition)
            else:
                self.get_logger().info(transition)
            self._publish_diagnostics()  # at once, not at the next report
        if not accepted and after in CONFIDENCE_STATES:
            self.get_logger().info(f"chunk not followed: {text}", throttle_duration_sec=2.0)
        elif not accepted:
            self.get_logger().warning(f"chunk rejected: {text}", throttle_duration_sec=1.0)
            self._problem_diagnostics()
        elif text:
            self.get_logger().warning(f"chunk accepted with changes: {text}", throttle_duration_sec=1.0)

    def _on_stop(self, request, response):
        self.core.stop()
        response.success = True
        response.message = "stopped: holding the last commanded position; call ~/resume to continue"
        self.get_logger().info(response.message)
        self._publish_diagnostics()
        return response

    def _on_resume(self, request, response):
        held = self.core.state is ExecutorState.HOLDING_UNCERTAIN
        self.core.resume()
        response.success = True
        response.message = "resumed: accepting chunks" + (" (the confidence hold ended)" if held else "")
        self.get_logger().info(response.message)
        self._publish_diagnostics()
        return response

    def _on_engage(self, request, response):
        self.core.engage()
        s = self.core.status_snapshot()
        response.success = True
        response.message = "engaged: the policy has the arm, from the measured joints; chunks accepted"
        if s.activity is TickActivity.WAITING_FOR_JOINT_STATE:
            response.message += " (no joint state yet: commands start once it arrives)"
        elif s.problems:
            response.message += f" (commands start with a fresh joint state and a new chunk: {s.activity})"
        self.get_logger().info(response.message)
        self._publish_diagnostics()
        return response

    def _on_disengage(self, request, response):
        self.core.disengage()
        response.success = True
        response.message = "disengaged: holding the last commanded position, chunks ignored; call ~/engage"
        self.get_logger().info(response.message)
        self._publish_diagnostics()
        return response

    def _before_time_jump(self) -> None:
        """rclpy pre-jump callback (executor thread, before the new time is set): drop everything on the old clock.
        Never raises: an exception here would escape from the /clock subscription's callback."""
        try:
            self.core.clock_jumped_back("the clock jumped back (details in the log)")
            if self.lockstep is not None:
                self.lockstep.clear()
            if self.state_watch is not None:
                self.state_watch.clear()
        except Exception as err:  # noqa: BLE001
            self.get_logger().error(f"handling a clock jump failed: {type(err).__name__}: {err}")

    def _after_time_jump(self, jump) -> None:
        """rclpy post-jump callback: say what happened (log, diagnostics)."""
        try:
            what = time_jump_text(jump, self.now_s())
            self.core.describe_time_jump(what)
            self.get_logger().warning(
                f"{what}: chunks dropped; sending nothing until a joint state on the new "
                "clock, then holding there until a new chunk"
            )
            self._publish_diagnostics()
        except Exception as err:  # noqa: BLE001
            self.get_logger().error(f"reporting a clock jump failed: {type(err).__name__}: {err}")

    def _on_tick_error(self, err: BaseException) -> None:
        self.get_logger().error(f"control tick failed: {type(err).__name__}: {err}", throttle_duration_sec=1.0)

    def _tick(self, now: float | None = None) -> bool:
        """One control tick at ``now`` (default: the node's clock); True when a command was sent."""
        command = self.command_at(self.now_s() if now is None else now)
        if command is None:
            return False
        self.backend.send(command)
        self.publish_commanded_pose(command)
        return True

    def publish_commanded_pose(self, command) -> None:
        """The tool pose of ``command`` on ``commanded_pose_topic`` (rviz), stamped with the time it is meant for."""
        self.pose_pub.publish(pose_stamped(command, self.world_frame))

    def command_at(self, now: float, read_state: bool = True):
        """The core's command of the tick at ``now`` (None: nothing to send), the arm's state read first.
        ``read_state`` False (lockstep batches, :mod:`para_ros.sim.lockstep` rule 7): a state of this instant exists
        but is not read; only its time goes to the watchdog (call it only while
        :meth:`ExecutorCore.needs_measured_joints` is False)."""
        if now <= 0.0:  # use_sim_time and no /clock yet
            return None
        if read_state:
            measured, measured_s = self._read_state(now)
            if measured is not None and measured_s is not None:
                self.core.set_measured_joints(*measured, measured_s=measured_s)
        else:
            self.core.state_measured_at(now)
        command = self.core.tick(now)
        self._report_feedback()
        return command

    def _read_state(self, now: float):
        """(measured joints or None, when they were measured or None) from the backend (see module docstring)."""
        try:
            measured = self.backend.read_joints()
        except Exception as err:  # noqa: BLE001 - a failing read is lost feedback, not a dead control loop
            self.get_logger().error(
                f"reading the arm's joints failed: {type(err).__name__}: {err}", throttle_duration_sec=1.0
            )
            return None, None
        if measured is None:
            return None, None
        return measured, (self.state_watch.last_complete_s() if self.state_watch is not None else now)

    def _report_feedback(self) -> None:
        """Log lost feedback (error, throttled) and its end (info, at the change); publish diagnostics at once when
        the activity enters or leaves a WARN activity (:class:`ActivityChanges`; the control thread calls this every
        tick)."""
        s = self.core.status
        problem = s.problems.get(JOINT_STATE_PROBLEM)
        if problem is not None:
            self.get_logger().error(
                f"{problem} (now {s.joint_state_age_s:.3f} s old; state from {self._state_source})",
                throttle_duration_sec=1.0,
            )
        note, at_once = self.activity_changes.update(s.activity)
        if note:
            self.get_logger().info(note)
        if at_once:
            self._problem_diagnostics()

    # ---- diagnostics ----------------------------------------------------------------------------------------

    def _problem_diagnostics(self) -> None:
        now = time.monotonic()
        if now - self._last_problem_diag_s >= 0.1:  # throttle: at most 10 Hz under a flood of bad chunks
            self._last_problem_diag_s = now
            self._publish_diagnostics()

    def _apply_parameters(self, changes: dict) -> None:
        """On-set callback (after the table's checks): the dynamic parameters go to the core; ValueError refuses."""
        params = {**self.params, **changes}
        self.core.reconfigure(build_executor_config(params, self.arm))
        self.params = params
        self.get_logger().info("parameters changed: " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))

    def _diagnostic_source(self) -> tuple[bytes, str, dict]:
        """The status the health reporter publishes: (level, message, values) of the core's state now
        (:mod:`para_ros.execution.executor_diagnostics`), with the backend and the control loop's figures."""
        s = self.core.status_snapshot()
        level, problems, self._last_report = diagnostic_summary(s, self._last_report)
        values = {
            **status_values(s, self.core.config),
            "backend": self.backend.name,
            **control_loop_values(self.loop.stats(), self.loop.scheduler, self.ros_thread_scheduler),
        }
        if self.state_publisher is not None:
            values["joint_states_published"] = self.state_publisher.published
            values["state_publish_failures"] = self.state_publisher.failures
            values["last_state_publish_error"] = self.state_publisher.last_error
        return bytes([level]), headline(s, problems), values

    def _publish_diagnostics(self) -> None:
        self.health.publish()

    def shutdown(self) -> None:
        self.loop.stop()
        if self.state_publisher is not None:
            self.state_publisher.close()
        try:
            self.backend.close()
        except Exception as err:  # noqa: BLE001
            self.get_logger().warning(f"backend close failed: {err}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``chunk_executor [--params-file FILE] [--ros-args ...]``."""

    return run_node(
        ChunkExecutorNode,
        prog="chunk_executor",
        description=__doc__.split("\n\n")[0],
        default_params_file="executor.yaml",
        argv=argv,
        epilog=parameter_table().help_text(),
    )


if __name__ == "__main__":
    raise SystemExit(main())
