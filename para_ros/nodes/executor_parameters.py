"""The chunk executor node's parameters: one table (:class:`para_ros.nodes.parameters.ParameterTable`) behind
``ros2 param describe``, ``--help``, the shipped ``config/executor.yaml`` and ``docs/parameters.md``, with every
registered command backend's parameters under its own section (:mod:`para_ros.nodes.command_backends`). What the
values mean to the executor: :mod:`para_ros.execution.config_from_parameters`."""

from __future__ import annotations

from para_ros.execution.chunk import IMPLAUSIBLE_SPEED_MODES, OUT_OF_WORKSPACE_MODES
from para_ros.nodes.command_backends import COMMAND_BACKENDS, backend_parameters
from para_ros.nodes.parameters import Param, ParameterTable
from para_ros.sim.lockstep import ACK_TOPIC, BATCH_TOPIC, DEFAULT_LATENCY_S, HORIZON_TOPIC

NODE_NAME = "chunk_executor"

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
        "confidence_grace_s",
        1.0,
        "After the arm is handed to the policy (~/engage, ~/resume) its chunks' measures are not judged for this long "
        "(s): the arm follows them at full speed, and the hold clocks start after it. The policy is often unsure in "
        "its first second from a standstill, and a hold there never ends (the arm stays still, the images stay the "
        "same). Refused chunks count from the start. 0 = judge from the first chunk.",
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
