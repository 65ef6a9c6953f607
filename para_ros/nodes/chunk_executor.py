"""The chunk executor node: PARA action chunks in, safe joint (or tool pose) commands for an arm out (the YAM by
default; any arm description via ``yam_config``).

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
(``confidence_problem``; the state is ``mode``: ``following_slowly`` / ``holding_uncertain``).
Publishes ``/diagnostics`` (``diagnostic_msgs/DiagnosticArray``: the safety state ``mode`` with every change of it
named (``last_transition``, ``recent_transitions``; ``para_ros.execution.executor_state``), the tick's activity
``state``, counters, the latest problem named, the tick
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
import threading
import time

from geometry_msgs.msg import PoseStamped
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from para_msgs.msg import ActionChunk
from para_ros.execution.chunk import IMPLAUSIBLE_SPEED_MODES, OUT_OF_WORKSPACE_MODES, ChunkChecks
from para_ros.execution.confidence_supervisor import SupervisorConfig
from para_ros.execution.control_loop import FixedRateLoop, request_fifo
from para_ros.execution.executor_core import (
    DISENGAGED,
    JOINT_STATE_LOST,
    JOINT_STATE_PROBLEM,
    STOPPED,
    TIME_JUMP_BACK_MIN_S,
    WAITING_FOR_CHUNK,
    ExecutorConfig,
    ExecutorCore,
)
from para_ros.execution.executor_state import HOLDS_UNCERTAIN, SLOWED, ExecutorState
from para_ros.execution.smoothing import JerkLimits
from para_ros.execution.timeline import BlendConfig
from para_ros.nodes.command_backends import (
    COMMAND_BACKENDS,
    BackendContext,
    backend_parameters,
    command_backend,
)
from para_ros.nodes.health import ERROR, OK, WARN, HealthReporter
from para_ros.nodes.lockstep_hooks import ExecutorLockstep
from para_ros.nodes.parameters import Param, ParameterTable
from para_ros.nodes.runtime import run_node, time_jump_text
from para_ros.robot.yam import load_yam_config
from para_ros.robot.yam_frames import YamFrames
from para_ros.ros_io.chunk_msg import chunk_from_msg
from para_ros.ros_io.sdk_state import SdkStatePublisher
from para_ros.ros_io.topic_backends import JOINT_STATE_QOS, pose_stamped
from para_ros.sim.lockstep import ACK_TOPIC, BATCH_TOPIC, DEFAULT_LATENCY_S, HORIZON_TOPIC

NODE_NAME = "chunk_executor"
CONFIDENCE_STATES = SLOWED | HOLDS_UNCERTAIN  # the confidence supervisor's states: their changes are logged

# The confidence supervisor (para_ros.execution.confidence_supervisor, docs/confidence.md). The thresholds' defaults
# are fitted for the default checkpoint by `scripts/confidence fit` (para-sim confidence-report --steps-checked 1
# --slow-rate 0.1 --measures peak_mass,chunk_agreement,view_agreement over 100 nominal lockstep episodes and 10 of
# each out-of-distribution condition, seeds 100000-: docs/confidence.md has the figures and the rule's choice).
CONFIDENCE_PARAMETERS = (
    Param(
        "confidence_supervisor",
        False,
        "Act on the policy's own confidence: follow an uncertain chunk slowly, hold where the arm is when the policy "
        "stays very uncertain, say why on /diagnostics (confidence_problem), resume after confident chunks or "
        "~/resume. The supervisor only slows (tighter speed limits) or holds: every command still passes the "
        "safety filter. false = off: chunks are followed as they come.",
        dynamic=True,
        section="confidence supervisor (docs/confidence.md)",
    ),
    Param(
        "confidence_peak_mass_slow_below",
        0.64,
        "Slow down while a chunk's peak mass (probability near the chosen point, 0..1) is below this at some checked "
        "step; 0 = off.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_peak_mass_hold_below",
        0.64,
        "Hold while the peak mass stays below this for confidence_hold_after_s; 0 = off. At most the slow threshold.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_entropy_slow_above",
        1.0,
        "Slow down while a chunk's normalised entropy (0 = all on one voxel .. 1 = uniform) is above this at some "
        "checked step; 1 = off.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_entropy_hold_above",
        1.0,
        "Hold while the entropy stays above this for confidence_hold_after_s; 1 = off. At least the slow threshold.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_chunk_agreement_slow_below",
        0.01,
        "Slow down while a chunk's agreement with the chunk before it (probability the new chunk gives to where the "
        "old one puts the tool, 0..1) is below this; 0 = off.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_chunk_agreement_hold_below",
        0.01,
        "Hold while the chunk agreement stays below this for confidence_hold_after_s; 0 = off.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_view_agreement_slow_below",
        0.52,
        "Slow down while the view agreement (the smallest share of its own probability a camera that sees the chosen "
        "point puts near it, 0..1) is below this; 0 = off.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_view_agreement_hold_below",
        0.46,
        "Hold while the view agreement stays below this for confidence_hold_after_s; 0 = off.",
        range=(0.0, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_steps_checked",
        1,
        "Judge the first this many steps of each chunk (those executed before the next chunk); 0 = every step.",
        range=(0, 1024),
        dynamic=True,
    ),
    Param(
        "confidence_hold_after_s",
        0.5,
        "Hold once one measure has been beyond its hold threshold in every chunk for this long (s); until then the "
        "arm is slowed.",
        range=(0.0, 60.0),
        dynamic=True,
    ),
    Param(
        "confidence_resume_after_chunks",
        3,
        "Confident chunks in a row that end slowing or holding (full speed again); ~/resume ends them at once.",
        range=(1, 1000),
        dynamic=True,
    ),
    Param(
        "confidence_slow_speed_scale",
        0.3,
        "While slowed, the joint and tool speed limits are this fraction of config/yam.yaml's.",
        range=(0.01, 1.0),
        dynamic=True,
    ),
    Param(
        "confidence_rejected_hold_count",
        10,
        "Hold once this many of the last confidence_rejected_window_chunks chunks were refused by the chunk checks "
        "(a policy that keeps predicting the tool where it is not); 0 = off. At most the window.",
        range=(0, 1000),
        dynamic=True,
    ),
    Param(
        "confidence_rejected_window_chunks",
        10,
        "How many of the latest chunks confidence_rejected_hold_count looks at.",
        range=(1, 1000),
        dynamic=True,
    ),
)

COMMON_PARAMETERS = (  # the executor's own parameters, before the command backends'
    Param("control_rate_hz", 100.0, "Commands per second (Hz).", range=(1.0, 2000.0), section="timing"),
    Param(
        "command_lookahead_s",
        0.05,
        "The command sent at tick t targets the chunk pose due at t + this (s); a JointTrajectory carries it as "
        "one point, stamp 0 (start on receipt), time_from_start = lookahead. 0.05 s (5 periods), not one period: "
        "with 0.01 s each point is reached just as the next command is due, so any late command (DDS delivery, a "
        "busy machine) parks the controller at the old point: stop-and-go motion; with 0.05 s up to ~40 ms of "
        "jitter passes without a stop, at the price of smoothing a step in the chunk over ~50 ms. The i2rt_sdk "
        "backend sends positions straight to the servos: there it is a lead over the servo lag (lower it, e.g. "
        "0.01, if the real arm runs ahead of the chunks).",
        range=(0.001, 1.0),
    ),
    Param(
        "chunk_min_lead_s",
        0.25,
        "A chunk takes effect at least this far ahead of its camera frame (s): while the newest chunk came L s "
        "after its frame, the lookahead (where on the chunk each command is taken, and when it is to be reached) "
        "is max(command_lookahead_s, this - L). A chunk's step 0 is where the "
        "camera saw the arm, and a position-controlled arm lags its command: followed from its first steps, every "
        "fresh chunk pulls the command back to where the arm was seen, and with chunks that arrive within tens of "
        "ms (a GPU) the arm slows to a stop above its goal. 0.25 s = the 0.2 s CPU inference latency plus the "
        "0.05 s lookahead that checkpoints/pick_place was trained and evaluated with; at that latency it changes "
        "nothing. 0: off.",
        range=(0.0, 2.0),
    ),
    Param(
        "control_thread_priority",
        50,
        "Linux real-time priority of the control thread: 1..99 asks for SCHED_FIFO at that priority (needs root, "
        "CAP_SYS_NICE or an rtprio limit in /etc/security/limits.conf; the Python thread switch interval drops to 1 "
        "ms, and the node's ROS thread, which the control thread waits for when it holds the GIL, gets SCHED_FIFO "
        "one level lower), so a busy machine cannot delay the ticks; 0 = the normal scheduler. The default 50 is "
        "ros2_control's controller manager's; where the OS refuses it the loop runs on the normal scheduler. What "
        "they got is on /diagnostics (control_scheduler, ros_thread_scheduler).",
        range=(0, 99),
    ),
    Param(
        "stale_timeout_s",
        0.5,
        "Hold position when no chunk was accepted for this long (s).",
        range=(0.001, 3600.0),
        dynamic=True,
    ),
    Param(
        "auto_engage",
        False,
        "Hand-over: false = start DISENGAGED (nothing published on the command topics, chunks ignored) until "
        "~/engage (std_srvs/Trigger), which starts from the measured joints; ~/disengage holds at once. true = "
        "follow chunks from the start. The launchers set true for the simulator, and for a real arm only with "
        "--engage / engage:=true.",
    ),
    Param(
        "joint_state_timeout_s",
        0.2,
        "Lost feedback: while the arm's state (the last complete JointState on joint_states_topic, or the last "
        "SDK read) is older than this (s), the executor sends NO commands (the real YAM's motors time out after "
        "400 ms), drops its chunks and reports joint_state on /diagnostics; it commands again only with a fresh "
        "state and a new chunk (or ~/engage, ~/resume), from the measured joints.",
        range=(0.001, 10.0),
    ),
    Param(
        "blend_mode",
        "latest",
        "How overlapping chunks combine: 'latest' (the newest covering chunk wins) or "
        "'ensemble' (ACT temporal ensembling, weight exp(-ensemble_k * j), j = 0 the oldest chunk).",
        choices=("latest", "ensemble"),
        section="blending of overlapping chunks",
    ),
    Param(
        "ensemble_k",
        0.01,
        "Decay of the ensembling weight per chunk (> 0 favours older chunks like ACT, < 0 newer).",
        range=(-100.0, 100.0),
    ),
    Param(
        "max_chunks",
        32,
        "Most chunks kept on the timeline at once; the oldest are dropped beyond it.",
        range=(1, 100000),
    ),
    Param(
        "max_chunk_age_s",
        1.0,
        "Reject chunks whose header.stamp is older than this (s).",
        range=(0.0, 3600.0),
        dynamic=True,
        section="chunk acceptance (a failing chunk is rejected whole; see implausible_speed)",
    ),
    Param(
        "max_chunk_future_s",
        0.5,
        "Reject chunks whose header.stamp is further in the future than this (s; a clock mismatch).",
        range=(0.0, 3600.0),
        dynamic=True,
    ),
    Param("max_chunk_steps", 1024, "Reject chunks with more steps than this.", range=(1, 1000000), dynamic=True),
    Param(
        "max_implied_speed_m_s",
        1.0,
        "The fastest tool motion two consecutive chunk steps may imply (m/s); see implausible_speed.",
        range=(0.001, 100.0),
        dynamic=True,
    ),
    Param(
        "implausible_speed",
        "truncate_when_idle",
        "A chunk with a step faster than max_implied_speed_m_s: "
        "'reject' it whole (the arm goes on with the chunk it follows; a policy that predicts the same jump from "
        "the same state then holds the arm for ever), 'truncate' it before that step when at least two steps stay "
        "(they passed every check), or 'truncate_when_idle': reject it while the arm still follows an accepted "
        "chunk, truncate it when the arm would otherwise hold.",
        choices=IMPLAUSIBLE_SPEED_MODES,
        dynamic=True,
    ),
    Param(
        "out_of_workspace",
        "clamp",
        "Chunk poses outside the workspace box of yam.yaml: 'clamp' them into it or 'reject' the chunk.",
        choices=OUT_OF_WORKSPACE_MODES,
        dynamic=True,
    ),
    Param(
        "unreachable",
        "hold",
        "When IK cannot reach the target: 'hold' the previous command or take the 'best_effort' solution.",
        choices=("hold", "best_effort"),
        dynamic=True,
        section="IK",
    ),
    Param(
        "ik_position_tol_m",
        0.0005,
        "IK success threshold on the position error (m), checked by FK.",
        range=(1e-7, 0.1),
    ),
    Param(
        "ik_rotation_tol_rad",
        0.005,
        "IK success threshold on the rotation error (rad), checked by FK.",
        range=(1e-7, 1.0),
    ),
    Param(
        "ik_max_iters",
        40,
        "IK iteration cap per tick (bounds the time spent on unreachable targets).",
        range=(1, 10000),
    ),
    Param(
        "smoothing",
        "none",
        "Joint-space smoothing of the IK targets: 'none' or 'ruckig' (jerk-limited).",
        choices=("none", "ruckig"),
        section="optional jerk-limited smoothing (ruckig), joint space",
    ),
    Param("smoothing_max_velocity_rad_s", 2.0, "ruckig smoothing: joint velocity limit (rad/s).", range=(1e-6, 1000.0)),
    Param(
        "smoothing_max_acceleration_rad_s2",
        10.0,
        "ruckig smoothing: joint acceleration limit (rad/s^2).",
        range=(1e-6, 1e5),
    ),
    Param("smoothing_max_jerk_rad_s3", 100.0, "ruckig smoothing: joint jerk limit (rad/s^3).", range=(1e-6, 1e7)),
    *CONFIDENCE_PARAMETERS,
    Param(
        "yam_config",
        "",
        "Path of the arm description (model, joints, limits, wrist camera; para_ros.robot.arm); empty = the "
        "shipped config/yam.yaml (the safety limits live there, not here).",
        section="model and limits",
    ),
    Param(
        "calibration_file",
        "",
        "calibration.yaml (para-calib solve): its wrist_cam replaces yam_config's "
        "wrist_camera mount in the TF this node publishes (backend i2rt_sdk); empty = the CAD mount.",
    ),
    Param("chunk_topic", "/para/action_chunk", "para_msgs/ActionChunk input topic.", section="topics"),
    Param(
        "joint_states_topic",
        "/joint_states",
        "sensor_msgs/JointState topic the arm's joints are read from "
        "(topic backends), or published on (i2rt_sdk backend).",
    ),
    Param(
        "commanded_pose_topic",
        "~/commanded_pose",
        "geometry_msgs/PoseStamped of every command's tool pose (FK), "
        "for rviz; stamped with its target time (tick + the lookahead in force).",
    ),
    Param(
        "diagnostics_rate_hz",
        2.0,
        "Rate of the /diagnostics status (Hz); problems are also reported at once.",
        range=(0.01, 100.0),
    ),
)

# After the command backends' own parameters (para_ros.nodes.command_backends): the arm's state published by the
# executor for a backend that reads the arm directly (i2rt_sdk), then lockstep evaluation.
AFTER_BACKEND_PARAMETERS = (
    Param(
        "state_publish_rate_hz",
        100.0,
        "Backends that read the arm directly (i2rt_sdk): the executor owns the arm, so it publishes the "
        "arm's state itself: /joint_states (and /tf) read from the backend at this rate (Hz).",
        range=(0.1, 1000.0),
        section="the arm's state, published by the executor (backends that read the arm directly: i2rt_sdk)",
    ),
    Param(
        "publish_tf",
        True,
        "Backends that read the arm directly (i2rt_sdk): also broadcast the arm's /tf (base .. gripper, grasp_site, "
        "the wrist camera optical frame of config/yam.yaml's wrist_camera) from the joints read.",
    ),
    Param(
        "lockstep",
        False,
        "Lockstep evaluation against the simulator (para_ros.sim.lockstep; run with "
        "use_sim_time): instead of the fixed-rate loop, one tick per joint state of a new simulated instant, on "
        "exactly that state; each chunk takes effect at the first tick at or after its stamp + lockstep_latency_s; "
        "every tick and chunk is acknowledged on lockstep_ack_topic so the simulator steps only once they are done.",
        section="lockstep evaluation (para_ros/sim/lockstep.py)",
    ),
    Param(
        "lockstep_latency_s",
        DEFAULT_LATENCY_S,
        "Lockstep: simulated seconds from a chunk's stamp (its camera "
        "frame) until it takes effect. 0.05 s = a GPU-class inference time: the PARA v4 model on an H100-class "
        "GPU predicts a chunk in tens of ms (about 20-30 ms), plus about 10 ms of camera readout, transfer and "
        "pairing, rounded up to whole 10 ms control periods.",
        range=(0.0, 10.0),
    ),
    Param(
        "lockstep_ack_topic",
        ACK_TOPIC,
        "Lockstep: the acknowledgements to the simulator (std_msgs/Int64MultiArray).",
    ),
    Param(
        "lockstep_horizon_topic",
        HORIZON_TOPIC,
        "Lockstep batches (para_ros.sim.lockstep rule 7): the simulator's horizons (std_msgs/Int64MultiArray "
        "[t_ns, until_ns, step_ns]); after the tick at t the executor ticks every instant before until without its "
        "joint state, as long as no tick needs the measured joints' values, and sends those commands in one batch.",
    ),
    Param(
        "lockstep_batch_topic",
        BATCH_TOPIC,
        "Lockstep batches: the commands of a batch's ticks to the simulator (trajectory_msgs/JointTrajectory, one "
        "point a tick, an empty point for a tick that sent nothing).",
    ),
)

HEADER = """Parameters of the chunk executor node (para_ros.nodes.chunk_executor); `ros2 param describe /chunk_executor
<name>` says the same. Safety limits (joint range, speeds, workspace box, gripper range) are NOT here: they live in
config/yam.yaml."""


def parameter_table() -> ParameterTable:
    """The node's parameter table with every command backend registered now (:mod:`para_ros.nodes.command_backends`):
    ``backend`` takes their names, and each backend's parameters follow under its own section. The shipped
    ``config/executor.yaml``, ``--help`` and ``docs/parameters.md`` are this table with the shipped backends."""
    return ParameterTable(
        NODE_NAME,
        [*COMMON_PARAMETERS, *backend_choice(), *backend_parameters(), *AFTER_BACKEND_PARAMETERS],
        header=HEADER,
    )


def backend_choice() -> tuple[Param, ...]:
    """The ``backend`` parameter (its choices: the registered command backends) and the arm joints' wire names."""
    names = tuple(COMMAND_BACKENDS)
    return (
        Param(
            "backend",
            "joint_trajectory",
            "Command backend, where commands go: "
            + "; ".join(f"'{name}': {COMMAND_BACKENDS[name].description.rstrip('.')}" for name in names)
            + " (para_ros/nodes/command_backends.py; the launchers' robot picks one).",
            choices=names,
            section="command backend (where commands go)",
        ),
        Param(
            "arm_joint_names",
            "",
            "Names of the arm joints in JointTrajectory and JointState, comma-separated (a string list is joined), "
            "one per joint of the arm description in its order; empty = its model.joint_names (the YAM: "
            "joint1..joint6).",
        ),
    )


PARAMETERS = parameter_table()  # the shipped backends' table (a backend registered later: parameter_table())


def parse_joint_names(value, default: tuple[str, ...]) -> tuple[str, ...]:
    """``arm_joint_names`` as one name per arm joint: a comma-separated string or a list; empty = ``default`` (the
    arm description's ``model.joint_names``, whose length is the arm's joint count).

    :raises ValueError: naming the value, unless there are exactly ``len(default)`` distinct non-empty names.
    """
    if isinstance(value, str):
        names = tuple(n.strip() for n in value.split(",")) if value.strip() else ()
    else:
        names = tuple(str(n).strip() for n in (value or ()))
    if not names:
        return tuple(default)
    n = len(default)
    if len(names) != n or not all(names) or len(set(names)) != n:
        raise ValueError(
            f"parameter arm_joint_names={value!r}: give the {n} distinct arm joint names in the order of the arm "
            f"description's model.joint_names, comma-separated, e.g. {','.join(default)}"
        )
    return names


def build_executor_config(p: dict, yam):
    """ExecutorConfig from the node's parameter values and the arm description (frames; limits give the workspace
    box)."""

    checks = ChunkChecks(
        world_frame=yam.model.world_frame,
        tool_frames=(yam.model.tool_site,),
        max_age_s=p["max_chunk_age_s"],
        max_future_s=p["max_chunk_future_s"],
        max_steps=p["max_chunk_steps"],
        max_implied_speed_m_s=p["max_implied_speed_m_s"],
        implausible_speed=p["implausible_speed"],
        out_of_workspace=p["out_of_workspace"],
        workspace_min_m=yam.limits.workspace_min_m,
        workspace_max_m=yam.limits.workspace_max_m,
    )
    return ExecutorConfig(
        control_rate_hz=p["control_rate_hz"],
        command_lookahead_s=p["command_lookahead_s"],
        chunk_min_lead_s=p["chunk_min_lead_s"],
        stale_timeout_s=p["stale_timeout_s"],
        blend=BlendConfig(p["blend_mode"], p["ensemble_k"], p["max_chunks"]),
        checks=checks,
        unreachable=p["unreachable"],
        smoothing=p["smoothing"],
        jerk_limits=JerkLimits(
            p["smoothing_max_velocity_rad_s"], p["smoothing_max_acceleration_rad_s2"], p["smoothing_max_jerk_rad_s3"]
        ),
        ik_position_tol_m=p["ik_position_tol_m"],
        ik_rotation_tol_rad=p["ik_rotation_tol_rad"],
        ik_max_iters=p["ik_max_iters"],
        joint_state_timeout_s=p["joint_state_timeout_s"],
        start_engaged=p["auto_engage"],
        supervisor=supervisor_config(p),
    )


def supervisor_config(p: dict) -> SupervisorConfig:
    """The confidence supervisor's config from the node's ``confidence_*`` parameters (ValueError names a bad pair)."""
    return SupervisorConfig(
        enabled=p["confidence_supervisor"],
        peak_mass_slow_below=p["confidence_peak_mass_slow_below"],
        peak_mass_hold_below=p["confidence_peak_mass_hold_below"],
        entropy_slow_above=p["confidence_entropy_slow_above"],
        entropy_hold_above=p["confidence_entropy_hold_above"],
        chunk_agreement_slow_below=p["confidence_chunk_agreement_slow_below"],
        chunk_agreement_hold_below=p["confidence_chunk_agreement_hold_below"],
        view_agreement_slow_below=p["confidence_view_agreement_slow_below"],
        view_agreement_hold_below=p["confidence_view_agreement_hold_below"],
        steps_checked=p["confidence_steps_checked"],
        hold_after_s=p["confidence_hold_after_s"],
        resume_after_chunks=p["confidence_resume_after_chunks"],
        slow_speed_scale=p["confidence_slow_speed_scale"],
        rejected_hold_count=p["confidence_rejected_hold_count"],
        rejected_window_chunks=p["confidence_rejected_window_chunks"],
    )


# Executor problems that are events, counted in ExecutorStatus: (counter, ERROR rather than WARN, its message from the
# status). Each is reported in the first /diagnostics after it happened and is gone from the next one unless it
# happened again (its condition is the event itself), see diagnostic_summary.
EVENT_PROBLEMS = (
    ("check_failures", True, lambda s: f"command failed the final limit check (not sent): {s.last_check_failure}"),
    ("chunks_rejected", False, lambda s: f"chunk rejected: {s.last_rejection}"),
    ("ik_failures", False, lambda s: f"unreachable target: {s.last_ik_error}"),
    ("limit_events", False, lambda s: f"limits applied: {s.last_limit_event}"),
    ("chunks_modified", False, lambda s: f"chunk modified: {s.last_warning}"),
)
# Executor states that are not normal operation: /diagnostics is at least WARN while the state lasts.
WARN_STATES = (
    "hold_stale",
    "hold_uncertain",
    "hold_unreachable",
    "stopped",
    "waiting_for_joint_state",
    "joint_state_lost",
    "waiting_for_chunk",
    "disengaged",
)


def reported_at_once(previous: str, state: str) -> bool:
    """True when the executor's activity went from ``previous`` to ``state`` into or out of a WARN state: that change
    goes on ``/diagnostics`` at the tick it happens, not at the next periodic report, so whoever watches the arm (an
    operator, the evaluator timing a hold) hears within a tick that the arm stopped following chunks, and why."""
    return previous != state and (previous in WARN_STATES or state in WARN_STATES)


def diagnostic_summary(status, previous: dict | None) -> tuple[int, list[str], dict]:
    """Level, problem texts and the counters to keep, for one ``/diagnostics`` report of an ``ExecutorStatus``.

    ROS-free, so the rule is unit-testable: an active problem of ``status.problems`` (``joint_state``: lost feedback)
    is reported, at ERROR, for as long as the core keeps it (it removes it when the condition is gone); the confidence
    supervisor's reason for slowing or holding (``status.confidence_problem``) at WARN while it lasts; an event
    problem (:data:`EVENT_PROBLEMS`) is reported when its counter grew since the ``previous`` report's counters (None:
    the first report, every non-zero counter) and is gone from the next report if it did not happen again; a state of
    :data:`WARN_STATES` raises the level to WARN while it lasts.

    :returns: (level: ``para_ros.nodes.health`` OK / WARN / ERROR, problem texts, the counters to pass as ``previous`` next)
    """

    counters = {name: getattr(status, name) for name, _, _ in EVENT_PROBLEMS}
    problems = [f"{key}: {message}" for key, message in status.problems.items()]
    level = ERROR if problems else OK
    if status.confidence_problem:
        problems.append(f"confidence: {status.confidence_problem}")
        level = max(level, WARN)
    for name, is_error, describe in EVENT_PROBLEMS:
        if counters[name] - (previous or {}).get(name, 0) > 0:
            problems.append(describe(status))
            level = max(level, ERROR if is_error else WARN)
    if status.state in WARN_STATES:
        level = max(level, WARN)
    return level, problems, counters


def raise_ros_thread_priority(control_priority: int, control_scheduler: str) -> str:
    """In the thread that will spin the node: SCHED_FIFO one level below the control thread, or why not.

    The control thread needs the GIL, and the thread most likely to hold it is this one (callbacks: joint states at
    the arm's rate, chunks). At normal priority the OS may preempt it for the simulator or the model while it holds
    the GIL, and the real-time control thread then waits behind it (priority inversion); one level below, it runs
    its callbacks to the end, and rclpy's wait releases the GIL between them. Only when the control thread did get
    ``SCHED_FIFO control_priority`` (``control_scheduler``, what :class:`FixedRateLoop` reports) and there is a level
    below it (priority >= 2). Threads this thread starts later inherit the level (Linux)."""
    if control_priority <= 0:
        return "normal"
    if control_scheduler != f"SCHED_FIFO {control_priority}":
        return "normal (the control thread is not real-time)"
    if control_priority < 2:
        return "normal (control_thread_priority 1 has no real-time level below it)"
    return request_fifo(int(control_priority) - 1)


class JointStateWatch:
    """When every joint the executor reads was last heard on a ``JointState`` topic (receipt time, node clock).

    A subscription of its own next to the backend's reader (``JointStateReader`` keeps values, not times), with the
    reader's rule: joints may come split over several messages and are merged by name, so the state is as old as its
    least recently heard joint (:meth:`last_complete_s`). Receipt time, not ``header.stamp``: a driver's clock may
    differ from this node's, and what the watchdog needs is whether the state still arrives.
    """

    def __init__(self, node, topic: str, names: tuple[str, ...], now_s):
        self.names = tuple(names)
        self._now_s = now_s
        self._heard: dict[str, float] = {}
        self._lock = threading.Lock()
        self.sub = node.create_subscription(JointState, topic, self._on_joint_state, JOINT_STATE_QOS)

    def _on_joint_state(self, msg) -> None:
        if len(msg.position) != len(msg.name):  # the reader ignores these too
            return
        t = self._now_s()
        with self._lock:
            for name, position in zip(msg.name, msg.position):
                if name in self.names and position == position and abs(position) != float("inf"):
                    self._heard[name] = t

    def last_complete_s(self) -> float | None:
        """Receipt time of the oldest of the needed joints' latest values; None until each was heard once."""
        with self._lock:
            if not all(n in self._heard for n in self.names):
                return None
            return min(self._heard[n] for n in self.names)

    def clear(self) -> None:
        """Forget every receipt time (the clock jumped back: they are on the old clock)."""
        with self._lock:
            self._heard.clear()


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
            self.state_watch = JointStateWatch(
                self, p["joint_states_topic"], self.arm_joint_names + gripper, self.now_s
            )
        self._state_source = (
            f"{p['joint_states_topic']}" if self.state_watch is not None else f"the {self.backend.name} read"
        )
        self._last_state = None  # executor state at the previous tick (feedback-loss log lines on changes)
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
        self.pose_pub = self.create_publisher(PoseStamped, p["commanded_pose_topic"], 100)
        self.chunk_sub = self.create_subscription(
            ActionChunk, p["chunk_topic"], self._on_chunk, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
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
            self.core.status.chunks_rejected += 1
            self.core.status.last_rejection = text
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
        if s.state == "waiting_for_joint_state":
            response.message += " (no joint state yet: commands start once it arrives)"
        elif s.problems:
            response.message += f" (commands start with a fresh joint state and a new chunk: {s.state})"
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
        """Log lost feedback (error, throttled) and its end (info, at the change); publish diagnostics at once
        when the executor enters or leaves a WARN state (:func:`reported_at_once`; the control thread calls this
        every tick)."""
        s = self.core.status
        state, problem = s.state, s.problems.get(JOINT_STATE_PROBLEM)
        if problem is not None:
            self.get_logger().error(
                f"{problem} (now {s.joint_state_age_s:.3f} s old; state from {self._state_source})",
                throttle_duration_sec=1.0,
            )
        previous, self._last_state = self._last_state, state
        if previous is None or state == previous:
            return
        lost = (JOINT_STATE_LOST, WAITING_FOR_CHUNK)
        idle = (DISENGAGED, STOPPED)  # not following chunks: nothing is sent whatever the feedback
        if previous == JOINT_STATE_LOST and state in (WAITING_FOR_CHUNK, *idle):
            until = "~/engage or ~/resume" if state in idle else "a new chunk is accepted"
            self.get_logger().info(
                f"joint state from {self._state_source} is fresh again: sending nothing until {until}"
            )
        elif previous in lost and state not in (*lost, *idle):
            self.get_logger().info(
                f"new chunk after the joint state loss: commanding again ({state}) from the measured joints"
            )
        if reported_at_once(previous, state):
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

    def _diagnostic_source(self) -> tuple[int, str, dict]:
        """The status the health reporter publishes: (level, message, values) of the core's state now."""
        s = self.core.status_snapshot()
        level, problems, self._last_report = diagnostic_summary(s, self._last_report)
        message = f"{s.state}" + (f"; {'; '.join(problems)}" if problems else "")
        stats = self.loop.stats()
        values = {
            "state": s.state,
            "backend": self.backend.name,
            "chunks_received": s.chunks_received,
            "chunks_accepted": s.chunks_accepted,
            "chunks_rejected": s.chunks_rejected,
            "chunks_ignored_stopped": s.chunks_ignored_stopped,
            "chunks_modified": s.chunks_modified,
            "chunks_truncated": s.chunks_truncated,
            "chunks_in_force": s.chunks_in_force,
            "last_rejection": s.last_rejection,
            "last_warning": s.last_warning,
            "ik_failures": s.ik_failures,
            "last_ik_error": s.last_ik_error,
            "limit_events": s.limit_events,
            "last_limit_event": s.last_limit_event,
            "check_failures": s.check_failures,
            "ticks": s.ticks,
            "commands": s.commands,
            "last_command_stamp_s": repr(s.last_command_stamp_s),
            "last_chunk_accepted_s": repr(s.last_chunk_accepted_s),
            "engaged": self.core.engaged,
            "joint_state_timeout_s": self.params["joint_state_timeout_s"],
            "joint_state_age_s": repr(s.joint_state_age_s),
            "last_joint_state_s": repr(s.last_joint_state_s),
            "joint_state_losses": s.joint_state_losses,
            "chunks_ignored_no_state": s.chunks_ignored_no_state,
            "time_jumps_back": s.time_jumps_back,
            "last_time_jump": s.last_time_jump,
            "mode": s.mode,
            "transitions": s.transitions,
            "last_transition": s.last_transition,
            "recent_transitions": "; ".join(s.recent_transitions),
            "confidence_supervisor": self.params["confidence_supervisor"],
            "confidence": s.confidence,
            "confidence_problem": s.confidence_problem,
            "chunks_uncertain": s.chunks_uncertain,
            "chunks_held_uncertain": s.chunks_held_uncertain,
            "speed_scale": s.speed_scale,
            "control_rate_hz": self.params["control_rate_hz"],
            "tick_compute_median_ms": 1e3 * stats.get("compute_median_s", float("nan")),
            "tick_start_error_p99_ms": 1e3 * stats.get("start_error_p99_s", float("nan")),
            "tick_period_error_p99_ms": 1e3 * stats.get("period_error_p99_s", float("nan")),
            "control_scheduler": self.loop.scheduler,
            "ros_thread_scheduler": self.ros_thread_scheduler,
            "overruns": int(stats.get("overruns", 0)),
        }
        if self.state_publisher is not None:
            values["joint_states_published"] = self.state_publisher.published
            values["state_publish_failures"] = self.state_publisher.failures
            values["last_state_publish_error"] = self.state_publisher.last_error
        values.update({f"problem.{key}": text for key, text in s.problems.items()})
        return level, message, values

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
