"""The chunk executor's logic, free of ROS: chunks in, one safe joint command per control tick out.

Per tick at time ``now`` (the caller's clock: the ROS clock in the node):

0. lost feedback (``joint_state_timeout_s`` set, the node's default 0.2 s): when the arm's measured state is older
   than that, the tick sends NOTHING (returns None), drops the timeline and reports the problem ``joint_state``.
   Nothing, not a hold: a hold would be a command computed from a state nobody measured, and a real arm's watchdog
   (the YAM's motors time out after 400 ms without commands) can only see a silent executor; what the arm does
   without commands is its driver's rule (a joint trajectory controller keeps the end of its last trajectory).
   Commands resume only when a fresh state has come AND a chunk was accepted after it, or ``resume``/``engage`` was
   called (chunks that arrive while the state is stale are ignored, counted): the first command then starts from the
   freshly measured joints, never from an old target (the timeline was dropped). Until that chunk the tick still sends
   nothing (``waiting_for_chunk``). A loss before the first command was ever sent (nothing to protect: with
   ``use_sim_time`` the first state can predate ``/clock``) ends with the fresh state alone;
1. stopped -> hold; no fresh chunk for ``stale_timeout_s`` -> drop the timeline and hold;
2. sample the timeline at ``now + command_lookahead_s`` (the command sent at ``now`` is where the tool should be
   a lookahead later; a joint trajectory controller gets it as the point at ``time_from_start = lookahead`` of a
   trajectory stamped 0, i.e. reached a lookahead after receipt); the lookahead grows when the newest chunk came
   sooner than ``chunk_min_lead_s`` after its camera frame (a chunk's first step is where the camera saw the arm,
   which lags its command; see :class:`ExecutorConfig`);
3. IK of the blended pose, seeded with the previous solution. Unreachable target (IK not within tolerance):
   ``unreachable="hold"`` keeps the previous command (default: no motion towards a pose the arm cannot take);
   ``"best_effort"`` takes the closest configuration the solver reached. Either way it is counted and reported;
4. optional jerk-limited smoothing (ruckig);
5. the safety filter (joint range, joint speed, workspace box and tool speed on FK, gripper range and speed) against
   the previous command, then an independent re-check of the result; a command failing the re-check is never sent
   (the previous one is repeated and the failure reported).

"Hold" means: send the previous command again (zero motion). Commands start only once the arm's joint state is
known (from the backend): the first command equals the measured joints. Lost feedback (step 0) and the start
disengaged (below) are the cases in which a tick with a known state sends nothing at all.

Time going back (a simulator reset restarts its ``/clock``, a bag replay loops): every time the executor holds is on
the old clock, so :meth:`ExecutorCore.clock_jumped_back` (the node calls it from rclpy's clock jump callback, before
the new time is set) drops the timeline, the staleness and watchdog times and the measured state's time, and the
executor then sends NOTHING until a joint state measured after the jump has come, from which it re-seeds (a reset
simulator has moved the arm: the old command must not pull it back); from then on it holds there until a new chunk.
The tick also catches a jump nobody announced: a tick :data:`TIME_JUMP_BACK_MIN_S` or more earlier than the previous
one, or a measured state timed that much after the tick (measured before the jump, on the old clock) is treated the
same way. A smaller step back is a clock publisher's jitter, not a jump (see the constant).

Who has the arm is the executor's safety state, one :class:`~para_ros.execution.executor_state.ExecutorState` moved by
the events of ONE table (``para_ros.execution.executor_state.TRANSITIONS``: engage, disengage, a chunk accepted, the
watchdog's loss and fresh state, a clock jump); each change is counted and named in the status (``state``,
``last_transition``, ``recent_transitions``) and so on ``/diagnostics``. Within a state the tick reports its activity,
the state's detail (``status.activity``: a :class:`~para_ros.execution.executor_state.TickActivity`).

The policy's own confidence (``config.supervisor``, off by default: :mod:`para_ros.execution.confidence_supervisor`)
judges each validated chunk into one of the table's chunk events: an uncertain chunk is followed with the safety
filter's speed limits scaled by ``slow_speed_scale`` (``FOLLOWING_SLOWLY``), a very uncertain one is not followed and
the arm holds its last command (``HOLDING_UNCERTAIN``, activity ``hold_uncertain``) until confident chunks come
back or ``resume`` is called; the reason is the status's ``confidence_problem`` (and so on ``/diagnostics``). Every
command still passes the unscaled filter's final check: the supervisor only ever makes the arm slower or still.

Engaged or not: with ``start_engaged`` False (the node's ``auto_engage: false``) the executor starts DISENGAGED: it
sends nothing (the arm stays with its driver, e.g. held by its own controller or moved by hand) and ignores chunks
until :meth:`ExecutorCore.engage`, which hands the arm to the policy from the measured joints (the first command
equals them: no jump). :meth:`ExecutorCore.disengage` holds at once (from the next tick every command repeats the
last one; chunks are dropped and ignored) until the next engage. ``engage``/``disengage`` are ``resume``/``stop``
(the node serves both pairs); the one difference to a plain ``stop`` is the silent start.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from para_core.model.rotations import make_matrix, matrix_to_quaternion
from para_ros.execution.chunk import Chunk, ChunkChecks, ChunkRejected, validate_chunk
from para_ros.execution.confidence_supervisor import ConfidenceSupervisor, SupervisorConfig
from para_ros.execution.executor_state import (
    FEEDBACK_LOST,
    HOLDS_UNCERTAIN,
    IGNORES_CHUNKS,
    NOT_ENGAGED_YET,
    RESTART_GRANTED,
    SLOWED,
    ExecutorEvent,
    ExecutorState,
    TickActivity,
    next_state,
    transition_text,
)
from para_ros.execution.safety import FilterReport, SafetyFilter, check_command
from para_ros.execution.smoothing import JerkLimitedSmoother, JerkLimits
from para_ros.execution.timeline import BlendConfig, Timeline
from para_ros.robot.arm import ArmDescription
from para_ros.robot.arm_kinematics import ArmKinematics

UNREACHABLE_MODES = ("hold", "best_effort")
SMOOTHING_MODES = ("none", "ruckig")

# A step back of the clock at least this large is a jump (a simulator reset, a bag loop); a smaller one is a clock
# publisher's jitter and is ignored: para-bag play's /clock steps back by up to milliseconds between its 100 Hz timer
# and the stamps it sends before each message, and clearing on those dropped the TF history the inference node needs.
# The same as the default max_chunk_future_s: after a jump this large, chunks of the old clock still on their way are
# refused as from the future. Both nodes use it (the inference node has its own copy: it does not import the executor).
TIME_JUMP_BACK_MIN_S = 0.5

# Keys of ExecutorStatus.problems (active problems, removed when their condition is gone)
JOINT_STATE_PROBLEM = "joint_state"  # the measured state is older than joint_state_timeout_s

RECENT_TRANSITIONS = 8  # how many of the latest state changes the status names


@dataclass
class ExecutorConfig:
    """Behaviour of the executor (ROS parameters of the node). The defaults are the node's (``config/executor.yaml``):
    a bare ``ExecutorConfig()`` starts disengaged with the joint-state watchdog on. Benches and offline tests that
    measure once and tick on pass ``start_engaged=True, joint_state_timeout_s=None`` (and ``chunk_min_lead_s=0`` for
    chunks checked against ``command_lookahead_s`` alone) explicitly.

    Args:
        control_rate_hz: commands per second.
        command_lookahead_s: the command sent at t targets the chunk pose due at t + lookahead.
        chunk_min_lead_s: the lookahead grows to ``chunk_min_lead_s - latency`` when that is larger, where latency is
            how long after its camera frame the newest chunk in force arrived: a chunk takes effect at least this far
            ahead of the frame it was predicted from, and time runs on from there. A chunk starts where the camera saw
            the arm, and a position-controlled arm lags its command; followed from its first steps, every fresh chunk
            pulls the command back to where the arm was seen, and with chunks that arrive within tens of ms (a GPU)
            the arm slows to a stop. With the lead the command runs ahead of the observation by the same margin
            whatever the inference latency. Default 0.25 s (the node's); 0: off.
        stale_timeout_s: hold when no chunk was accepted for this long.
        blend: how overlapping chunks combine (mode, ensemble_k, max_chunks).
        checks: what a chunk must satisfy (frames, ages, speeds, workspace policy).
        unreachable: "hold" or "best_effort" (see module docstring).
        smoothing: "none" or "ruckig".
        jerk_limits: limits of the ruckig smoother (used when smoothing == "ruckig").
        ik_position_tol_m, ik_rotation_tol_rad, ik_max_iters: IK success thresholds and effort cap.
        start_engaged: False (the default, the node's ``auto_engage: false``): start disengaged, sending nothing,
            until :meth:`ExecutorCore.engage` (module docstring); True: follow chunks from the start.
        supervisor: the confidence supervisor (:class:`SupervisorConfig`; off by default).
        joint_state_timeout_s: send nothing once the measured joint state is older than this (s; module docstring,
            step 0). Default 0.2 s (the node's parameter ``joint_state_timeout_s``); with it set,
            :meth:`ExecutorCore.set_measured_joints` needs the time of each measurement. None: no watchdog, for
            callers that measure once and tick on (benches, offline tests).
    """

    control_rate_hz: float = 100.0
    command_lookahead_s: float = 0.05
    chunk_min_lead_s: float = 0.25
    stale_timeout_s: float = 0.5
    blend: BlendConfig = field(default_factory=BlendConfig)
    checks: ChunkChecks = field(default_factory=ChunkChecks)
    unreachable: str = "hold"
    smoothing: str = "none"
    jerk_limits: JerkLimits = field(default_factory=lambda: JerkLimits(2.0, 10.0, 100.0))
    ik_position_tol_m: float = 5e-4
    ik_rotation_tol_rad: float = 5e-3
    ik_max_iters: int = 40
    joint_state_timeout_s: float | None = 0.2
    start_engaged: bool = False
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)

    def __post_init__(self):
        if self.joint_state_timeout_s is not None and not (
            np.isfinite(self.joint_state_timeout_s) and self.joint_state_timeout_s > 0
        ):
            raise ValueError(
                f"joint_state_timeout_s={self.joint_state_timeout_s!r}: must be > 0 s (default 0.2, well "
                "under the YAM's 400 ms motor timeout)"
            )
        if not (np.isfinite(self.control_rate_hz) and 1.0 <= self.control_rate_hz <= 2000.0):
            raise ValueError(f"control_rate_hz={self.control_rate_hz!r}: use a rate in [1, 2000] Hz (default 100)")
        if not (np.isfinite(self.command_lookahead_s) and 0.0 < self.command_lookahead_s <= 1.0):
            raise ValueError(f"command_lookahead_s={self.command_lookahead_s!r}: use (0, 1] s (default 0.05)")
        if not (np.isfinite(self.chunk_min_lead_s) and 0.0 <= self.chunk_min_lead_s <= 2.0):
            raise ValueError(f"chunk_min_lead_s={self.chunk_min_lead_s!r}: use [0, 2] s (the node's default 0.25)")
        if not (np.isfinite(self.stale_timeout_s) and self.stale_timeout_s > 0):
            raise ValueError(f"stale_timeout_s={self.stale_timeout_s!r}: must be > 0 s")
        if self.unreachable not in UNREACHABLE_MODES:
            raise ValueError(f"unreachable={self.unreachable!r}: use one of {UNREACHABLE_MODES}")
        if self.smoothing not in SMOOTHING_MODES:
            raise ValueError(f"smoothing={self.smoothing!r}: use one of {SMOOTHING_MODES}")

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_rate_hz


@dataclass
class JointCommand:
    """One command: joints (n,) rad (the arm description's joint order), gripper 0..1 (NaN: no gripper command, its state is unknown and no chunk has
    set it yet), the tool pose FK gives for them, and its timing.

    ``stamp_s`` is the tick time; the command is the target for ``target_time_s = stamp_s + time_from_start_s``
    (the chunk was sampled there), which is the stamp a commanded pose carries.
    """

    stamp_s: float
    time_from_start_s: float
    q_rad: np.ndarray
    gripper: float
    T_base_tool: np.ndarray
    moving: bool

    @property
    def target_time_s(self) -> float:
        """When the arm should be at this command: tick time + lookahead (s, the caller's clock)."""
        return self.stamp_s + self.time_from_start_s

    @property
    def quat_xyzw(self) -> np.ndarray:
        return matrix_to_quaternion(self.T_base_tool[:3, :3])


@dataclass
class ExecutorStatus:
    """Counters and the latest problems, for diagnostics.

    Times are on the caller's clock (the node's ROS clock): ``last_command_stamp_s`` is the tick time of the latest
    command (``commands`` counts it), ``last_chunk_accepted_s`` when the latest chunk was accepted (staleness runs
    from there). Read a consistent copy with :meth:`ExecutorCore.status_snapshot`.

    ``problems`` holds the active problems by key (``joint_state`` while the measured state is stale); each is removed
    when its condition is gone. ``joint_state_age_s`` is the age of the measured state at the latest tick (NaN
    without a watchdog), ``last_joint_state_s`` when it was measured. ``time_jumps_back`` counts the backward jumps of
    the clock (module docstring), ``last_time_jump`` says what the latest one was.

    ``state`` is the executor's state (:class:`ExecutorState`), ``activity`` its detail: what the latest tick did
    (:class:`TickActivity`). ``transitions`` counts the state's changes, ``last_transition`` names the latest
    (``following --feedback_lost--> waiting_for_chunk``) and ``recent_transitions`` the latest
    :data:`RECENT_TRANSITIONS`, oldest first.

    The confidence supervisor: ``confidence`` summarises the latest judged chunk (its worst value of each measure and
    the step); ``confidence_problem`` says why the arm is slowed or held (empty otherwise); ``chunks_uncertain`` and
    ``chunks_held_uncertain`` count the chunks judged uncertain and those not followed while holding;
    ``speed_scale`` is the fraction of the speed limits in force (1, or ``slow_speed_scale`` while slowed).
    """

    state: ExecutorState = ExecutorState.FOLLOWING
    activity: TickActivity = TickActivity.WAITING_FOR_JOINT_STATE
    chunks_received: int = 0
    chunks_accepted: int = 0
    chunks_rejected: int = 0
    chunks_ignored_stopped: int = 0
    chunks_modified: int = 0
    chunks_truncated: int = 0
    last_rejection: str = ""
    last_warning: str = ""
    ik_failures: int = 0
    last_ik_error: str = ""
    limit_events: int = 0
    last_limit_event: str = ""
    check_failures: int = 0
    last_check_failure: str = ""
    ticks: int = 0
    commands: int = 0
    last_command_stamp_s: float = float("nan")
    last_chunk_accepted_s: float = float("nan")
    chunks_in_force: int = 0
    last_tick_compute_s: float = 0.0
    chunks_ignored_no_state: int = 0
    joint_state_losses: int = 0
    joint_state_age_s: float = float("nan")
    last_joint_state_s: float = float("nan")
    problems: dict = field(default_factory=dict)
    time_jumps_back: int = 0
    last_time_jump: str = ""
    transitions: int = 0
    last_transition: str = ""
    recent_transitions: list = field(default_factory=list)
    confidence: str = ""
    confidence_problem: str = ""
    chunks_uncertain: int = 0
    chunks_held_uncertain: int = 0
    speed_scale: float = 1.0


def _same(a, b) -> bool:
    """Equality of config values that may hold numpy arrays (dataclasses compared field by field)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


class ExecutorCore:
    """Chunks in (:meth:`add_chunk`), one safe :class:`JointCommand` per :meth:`tick` out. Thread-safe.

    :param config: executor behaviour.
    :param arm: the arm's description (:class:`ArmDescription`: joints, limits, model; ``config/yam.yaml`` for the
        YAM). Every joint vector in and out has its ``n_joints`` values, in its ``joint_names`` order.
    :param kinematics: FK / IK of the arm's tool site over its joints (an :class:`ArmKinematics`; built from
        ``arm.model`` if None). Anything with ``fk``, ``fk_position``, ``ik``, ``joint_names``, ``joint_range_rad``,
        ``bodies`` and ``sites`` will do.
    :raises ValueError: the description does not fit its model (a joint, site or body it names is missing, or a
        joint limit lies outside the model's range): the executor refuses to start rather than guess.
    """

    def __init__(self, config: ExecutorConfig, arm: ArmDescription, kinematics: ArmKinematics | None = None):
        if not isinstance(arm, ArmDescription):
            raise ValueError(f"ExecutorCore arm={arm!r}: need an ArmDescription (para_ros.robot.arm)")
        self.config = config
        self.arm = arm
        self.limits = arm.limits
        self.n_joints = arm.n_joints
        self.kin = kinematics or ArmKinematics(
            arm.model, config.ik_position_tol_m, config.ik_rotation_tol_rad, config.ik_max_iters
        )
        arm.check_against_model(self.kin.joint_names, self.kin.joint_range_rad, self.kin.bodies, self.kin.sites)
        self.timeline = Timeline(config.blend)
        self.safety = SafetyFilter(self.limits, self.kin.fk_position)
        self.slow_safety = self._slow_filter(config.supervisor)
        self.supervisor = ConfidenceSupervisor(config.supervisor)
        self.smoother = (
            JerkLimitedSmoother(config.jerk_limits, config.period_s, self.n_joints)
            if config.smoothing == "ruckig"
            else None
        )
        self.status = ExecutorStatus()
        self._lock = threading.RLock()
        # (n,) last command sent (or the measured joints before the first); None: not seeded (no measured state yet,
        # or the clock jumped back): nothing is sent until a measured state seeds it
        self._q_cmd: np.ndarray | None = None
        self._g_cmd = float("nan")  # the gripper's last command (NaN: unknown, nothing sent for it)
        self._q_seed: np.ndarray | None = None  # (n,) last IK solution
        self._measured: tuple[np.ndarray, float] | None = None
        self._last_accept_s: float | None = None
        self._measured_s: float | None = None  # when self._measured was measured (caller's clock)
        self._last_tick_s: float | None = None  # the previous tick's time (a tick earlier than it: time went back)
        self._state = ExecutorState.FOLLOWING if config.start_engaged else ExecutorState.DISENGAGED
        self.status.state = self._state

    # Fields of ExecutorConfig that can change while the executor runs (a new value takes effect at the next chunk or
    # tick); the others shape objects built once (timeline, smoother, IK, control loop) and are fixed at start.
    RECONFIGURABLE = ("stale_timeout_s", "checks", "unreachable", "supervisor")

    def _slow_filter(self, supervisor: SupervisorConfig) -> SafetyFilter:
        """The safety filter of ``FOLLOWING_SLOWLY``: the arm's joint and tool speed limits scaled by
        ``slow_speed_scale`` (tighter, so its commands pass the unscaled filter's check too)."""
        scale = supervisor.slow_speed_scale
        slow = dataclasses.replace(
            self.limits,
            max_joint_speed_rad_s=self.limits.max_joint_speed_rad_s * scale,
            max_ee_speed_m_s=self.limits.max_ee_speed_m_s * scale,
        )
        return SafetyFilter(slow, self.kin.fk_position)

    def reconfigure(self, config: ExecutorConfig) -> None:
        """Take ``config`` from now on; :class:`ValueError` if it differs in a field outside :data:`RECONFIGURABLE`."""
        fixed = [
            f.name
            for f in dataclasses.fields(ExecutorConfig)
            if f.name not in self.RECONFIGURABLE and not _same(getattr(config, f.name), getattr(self.config, f.name))
        ]
        if fixed:
            raise ValueError(f"{', '.join(fixed)} cannot change while the executor runs: restart it with the new value")
        with self._lock:
            if not _same(config.supervisor, self.config.supervisor):
                self.slow_safety = self._slow_filter(config.supervisor)
                self.supervisor.config = config.supervisor
                if not config.supervisor.enabled:
                    self.supervisor.reset()  # off: no spell to end; a slowed or held state ends at the next chunk
            self.config = config

    # ---- inputs ---------------------------------------------------------------------------------------------------

    def set_measured_joints(self, q_rad: np.ndarray, gripper: float, measured_s: float | None = None) -> None:
        """Latest measured arm joints (n,) and gripper; the first one initialises the command.

        A state with another joint count than the arm's, or a non-finite value, is ignored (the arm's state stays
        unknown or as it was: nothing is guessed from it).

        ``gripper`` NaN means "not measured" (an arm whose gripper is commanded on its own topic): the gripper
        command then stays unset (NaN, nothing sent for it) until a chunk gives a gripper target, which becomes the
        first gripper command as it is (no rate limit from a value nobody knows); from then on the usual limits apply.

        :param measured_s: when the state was measured (the caller's clock, as ``tick``'s ``now_s``; the node: when
            the last complete ``JointState`` arrived, or when the SDK read succeeded). Required with
            ``joint_state_timeout_s``: the watchdog compares it with the tick time. The same state passed again with
            the same time does not make it fresh.
        """
        if self.config.joint_state_timeout_s is not None and measured_s is None:
            raise ValueError(
                "set_measured_joints: pass measured_s (when the state was measured) with "
                "joint_state_timeout_s set; the watchdog needs the age of the state"
            )
        q = np.asarray(q_rad, dtype=float).reshape(-1)
        if q.shape != (self.n_joints,) or not np.all(np.isfinite(q)) or np.isinf(gripper):
            return
        with self._lock:
            self._measured = (q.copy(), float(gripper))
            if measured_s is not None and (self._measured_s is None or measured_s > self._measured_s):
                self._measured_s = float(measured_s)
                self.status.last_joint_state_s = float(measured_s)
            if self._q_cmd is None:  # the first state, or the first after a backward clock jump: start where the arm is
                self._reseed(q, float(gripper) if np.isfinite(gripper) else self._g_cmd)
                self.status.activity = self._not_following_activity() or TickActivity.IDLE

    def needs_measured_joints(self) -> bool:
        """Whether the next tick reads the measured joints' values, not only when they were measured: before the
        first state (it seeds the command) and while feedback is lost or after a clock jump (the restart re-seeds
        from them). Otherwise a tick computes its command from the timeline, its previous command and the tick time
        alone: lockstep's batches (:mod:`para_ros.sim.lockstep`, rule 7) tick on without each instant's state."""
        with self._lock:
            return self._q_cmd is None or self._state in FEEDBACK_LOST

    def state_measured_at(self, measured_s: float) -> None:
        """A state was measured at ``measured_s`` whose values this executor does not read (only while
        :meth:`needs_measured_joints` is False): the watchdog's time alone, as :meth:`set_measured_joints` sets it."""
        with self._lock:
            if self._measured_s is None or measured_s > self._measured_s:
                self._measured_s = float(measured_s)
                self.status.last_joint_state_s = float(measured_s)

    def _reseed(self, q: np.ndarray, gripper: float) -> None:
        """Start commanding from the measured joints, clamped into the joint range: an arm that a simulator or its
        servos let drift past a limit (by 1e-4 rad, measured after a feedback loss under load) is never commanded to
        stay out there; the difference is far below one period's speed limit."""
        q = np.clip(q, self.limits.joint_lower_rad, self.limits.joint_upper_rad)  # (n,)
        self._q_cmd = q.copy()
        self._g_cmd = gripper
        self._q_seed = q.copy()
        if self.smoother is not None:
            self.smoother.reset(q)

    def _apply(self, event: ExecutorEvent) -> None:
        """Under the lock: move the safety state by ``event`` (the table); a change is counted and named."""
        before = self._state
        after = next_state(before, event)
        if after is before:
            return
        self._state = after
        if after not in SLOWED | HOLDS_UNCERTAIN:
            self.status.confidence_problem = ""
        self.status.speed_scale = self.config.supervisor.slow_speed_scale if after in SLOWED else 1.0
        text = transition_text(before, event, after)
        self.status.state = after
        self.status.transitions += 1
        self.status.last_transition = text
        self.status.recent_transitions = (self.status.recent_transitions + [text])[-RECENT_TRANSITIONS:]

    @property
    def state(self) -> ExecutorState:
        """The safety state (:class:`ExecutorState`)."""
        with self._lock:
            return self._state

    def _state_stale(self, now_s: float) -> bool:
        """True when the watchdog is on, a state was measured once, and the latest one is too old at ``now_s``."""
        timeout = self.config.joint_state_timeout_s
        return timeout is not None and self._measured_s is not None and now_s - self._measured_s > timeout

    def _no_state_reason(self, now_s: float) -> str:
        return (
            f"no fresh joint state for {now_s - self._measured_s:.3f} s (> joint_state_timeout_s "
            f"{self.config.joint_state_timeout_s:g} s)"
        )

    def add_chunk(self, chunk: Chunk, now_s: float) -> tuple[bool, str]:
        """Validate ``chunk`` and place it on the timeline. Returns (accepted, reason or warning text)."""
        chunk.received_s = now_s
        with self._lock:
            self.status.chunks_received += 1
            if self._state in IGNORES_CHUNKS:
                self.status.chunks_ignored_stopped += 1
                return False, self._ignored_reason()
            if self._state_stale(now_s):
                self.status.chunks_ignored_no_state += 1
                return False, f"{self._no_state_reason(now_s)}: chunk ignored until the arm's state is fresh again"
        try:
            clean, warnings = validate_chunk(chunk, now_s, self.config.checks)
        except ChunkRejected as err:
            with self._lock:
                self.status.chunks_rejected += 1
                self.status.last_rejection = str(err)
                return self._refused(str(err))
        truncated = clean.n_steps < chunk.n_steps
        with self._lock:
            if self._state in IGNORES_CHUNKS:
                self.status.chunks_ignored_stopped += 1
                return False, self._ignored_reason()
            if (
                truncated
                and self.config.checks.implausible_speed == "truncate_when_idle"
                and self._following_a_chunk(now_s)
            ):
                self.status.chunks_rejected += 1
                self.status.last_rejection = (
                    f"{'; '.join(warnings)}: rejected while the arm still follows an "
                    "earlier chunk (implausible_speed=truncate_when_idle)"
                )
                return self._refused(self.status.last_rejection)
            judgement = self.supervisor.judge(clean, now_s)
            event = judgement.event
            if (
                event is ExecutorEvent.CHUNK_ACCEPTED
                and self._state in SLOWED | HOLDS_UNCERTAIN
                and not self.supervisor.in_spell
            ):  # the supervisor has no spell to end (switched off, or its last word was lost): the state's ends now
                event = ExecutorEvent.CONFIDENT_AGAIN
            if judgement.summary:
                self.status.confidence = judgement.summary
            if event in (ExecutorEvent.CHUNK_UNCERTAIN, ExecutorEvent.CHUNK_VERY_UNCERTAIN):
                self.status.chunks_uncertain += 1
            if event is ExecutorEvent.CHUNK_VERY_UNCERTAIN or (
                self._state in HOLDS_UNCERTAIN and event is not ExecutorEvent.CONFIDENT_AGAIN
            ):
                return self._hold_back(event, judgement.reason)
            if not self.timeline.add(clean, now_s):
                if event is ExecutorEvent.CONFIDENT_AGAIN and self._state in SLOWED | HOLDS_UNCERTAIN:
                    self._apply(event)  # the spell is over, whether or not this chunk can still be followed
                self.status.chunks_rejected += 1
                self.status.last_rejection = "every step is already in the past"
                return False, self.status.last_rejection
            self.status.chunks_accepted += 1
            self._last_accept_s = now_s
            self._apply(event)  # after a feedback loss: grants the restart (all but a very uncertain chunk)
            if self._state in SLOWED and judgement.reason:
                self.status.confidence_problem = (
                    f"{judgement.reason}: slowed to {self.config.supervisor.slow_speed_scale:.0%} of the speed "
                    "limits; full speed after "
                    f"{self.config.supervisor.resume_after_chunks} confident chunks in a row or ~/resume"
                )
            self.status.last_chunk_accepted_s = now_s
            if truncated:
                self.status.chunks_truncated += 1
            if warnings:
                self.status.chunks_modified += 1
                self.status.last_warning = "; ".join(warnings)
            return True, "; ".join(warnings)

    def reject_unreadable_chunk(self, why: str) -> None:
        """A chunk message the caller could not turn into a :class:`Chunk` (``why``): counted as rejected."""
        with self._lock:
            self.status.chunks_rejected += 1
            self.status.last_rejection = why

    def _refused(self, why: str) -> tuple[bool, str]:
        """Under the lock: a chunk the checks refused (``why``); the supervisor counts it, and holds the arm when most
        of the latest chunks were refused (:meth:`ConfidenceSupervisor.judge_refused`)."""
        judgement = self.supervisor.judge_refused(why)
        if judgement.event is ExecutorEvent.CHUNK_VERY_UNCERTAIN:
            held, text = self._hold_back(judgement.event, judgement.reason)
            return held, f"{why}; {text}"
        return False, why

    def _hold_back(self, event: ExecutorEvent, reason: str) -> tuple[bool, str]:
        """Under the lock: a chunk the supervisor does not let the arm follow (very uncertain, or judged while holding
        and not the end of the spell): the event moves the state; on entering the hold the timeline goes (the arm
        holds its last command from the next tick)."""
        before = self._state
        self._apply(event)
        self.status.chunks_held_uncertain += 1
        if self._state in HOLDS_UNCERTAIN:
            if before not in HOLDS_UNCERTAIN:
                self.timeline.clear()
                self.status.chunks_in_force = 0
            if event is not ExecutorEvent.CHUNK_ACCEPTED or not self.status.confidence_problem:
                self.status.confidence_problem = (
                    f"{reason}: holding; resumes after {self.config.supervisor.resume_after_chunks} confident "
                    "chunks in a row or ~/resume"
                )
            why = reason or "holding: the policy was uncertain"
            return False, f"{why} (holding, chunk not followed)"
        return False, f"{reason}: chunk not followed"

    def _lookahead_s(self) -> float:
        """Under the lock: the lookahead in force: ``command_lookahead_s``, grown to ``chunk_min_lead_s`` minus the
        newest chunk's latency when that is larger (:class:`ExecutorConfig`). A command sent at t is the pose due at
        t + lookahead and goes out to be reached then (a JointTrajectory point's time_from_start)."""
        lookahead_s = self.config.command_lookahead_s
        latency_s = self.timeline.newest_latency_s()
        if self.config.chunk_min_lead_s > 0 and latency_s is not None:
            lookahead_s = max(lookahead_s, self.config.chunk_min_lead_s - latency_s)
        return lookahead_s

    def _sample_time_s(self, now_s: float) -> float:
        """Under the lock: when the pose this tick commands is due on the timeline."""
        return now_s + self._lookahead_s()

    def _following_a_chunk(self, now_s: float) -> bool:
        """Under the lock: an accepted chunk still gives a target at this tick's sample time and has not gone stale
        (the arm is not about to hold)."""
        end_s = self.timeline.end_s()
        if end_s is None or end_s <= self._sample_time_s(now_s):
            return False
        return self._last_accept_s is not None and now_s - self._last_accept_s <= self.config.stale_timeout_s

    def _not_following_activity(self) -> TickActivity | None:
        """The activity while chunks are not followed (under the lock): DISENGAGED / STOPPED, else None."""
        if self._state in NOT_ENGAGED_YET:
            return TickActivity.DISENGAGED
        return TickActivity.STOPPED if self._state in IGNORES_CHUNKS else None

    def _ignored_reason(self) -> str:
        if self._state in NOT_ENGAGED_YET:
            return "executor is disengaged: call ~/engage to hand the arm to the policy"
        return "executor is stopped (disengaged): call ~/resume or ~/engage to accept chunks again"

    def engage(self) -> None:
        """Hand the arm to the policy: accept chunks, starting from the latest measured joints (no jump)."""
        self.resume()

    def disengage(self) -> None:
        """Take the arm from the policy: hold at once (from the next tick), drop and ignore chunks until engaged."""
        self.stop()

    @property
    def engaged(self) -> bool:
        return self.state not in IGNORES_CHUNKS

    def stop(self) -> None:
        """Stop: drop every chunk; from the next tick on, commands hold the last commanded position."""
        with self._lock:
            self._apply(ExecutorEvent.DISENGAGE)  # after a feedback loss: only ~/resume restarts
            self.supervisor.reset()
            self.timeline.clear()
            self.status.activity = TickActivity.STOPPED

    def resume(self) -> None:
        """Accept chunks again, re-seeded from the latest measured joints (no jump if the arm was moved)."""
        with self._lock:
            # an explicit restart from the measured joints ends a feedback loss like a new chunk (the table)
            self._apply(ExecutorEvent.ENGAGE)
            self.supervisor.reset()  # the operator's call: the next chunks are judged afresh
            if self._measured is not None:
                q, g = self._measured
                self._reseed(q, g if np.isfinite(g) else self._g_cmd)  # unmeasured gripper: keep its last command
            self._last_accept_s = None
            self.status.activity = (
                TickActivity.IDLE if self._q_cmd is not None else TickActivity.WAITING_FOR_JOINT_STATE
            )

    def clock_jumped_back(self, what: str = "the clock jumped back") -> None:
        """The caller's clock went back (module docstring): drop the timeline and every time held on the old clock;
        send nothing until a joint state measured after the jump, re-seed from it, then hold until a new chunk.

        Call it before the new time is used (the node: rclpy's pre-jump callback), so that no tick or chunk on the new
        clock meets the old timeline. ``what`` describes the jump for diagnostics (``last_time_jump``)."""
        with self._lock:
            self._forget_time(what)

    def describe_time_jump(self, what: str) -> None:
        """Replace the description of the latest clock jump (the node knows its size only after the jump)."""
        with self._lock:
            self.status.last_time_jump = what

    def _forget_time(self, what: str) -> None:
        """Under the lock: everything timed on the old clock goes (see :meth:`clock_jumped_back`)."""
        self.timeline.clear()
        self.status.chunks_in_force = 0
        self._last_accept_s = None
        self._measured_s = None
        self._last_tick_s = None
        self.status.last_joint_state_s = float("nan")
        self.status.joint_state_age_s = float("nan")
        self.status.time_jumps_back += 1
        self.status.last_time_jump = what
        self.supervisor.forget_time()
        self._apply(ExecutorEvent.CLOCK_JUMPED_BACK)
        if self._q_cmd is not None:  # re-seeded by the first state measured after the jump (set_measured_joints)
            self._q_cmd = None
            self._measured = None
            self.status.activity = TickActivity.WAITING_FOR_JOINT_STATE

    def status_snapshot(self) -> ExecutorStatus:
        """A copy of :attr:`status` taken between ticks (its counters and times belong together)."""
        with self._lock:
            return dataclasses.replace(self.status, problems=dict(self.status.problems))

    @property
    def stopped(self) -> bool:
        return self.state in IGNORES_CHUNKS

    @property
    def last_command(self) -> tuple[np.ndarray, float] | None:
        with self._lock:
            return None if self._q_cmd is None else (self._q_cmd.copy(), self._g_cmd)

    # ---- the tick -------------------------------------------------------------------------------------------------

    def _feedback_ok(self, now_s: float) -> bool:
        """The watchdog (module docstring, step 0), under the lock: False when this tick must send nothing."""
        self.status.joint_state_age_s = now_s - self._measured_s
        if self._state_stale(now_s):
            if self._state not in FEEDBACK_LOST or JOINT_STATE_PROBLEM not in self.status.problems:
                # Before the first command there is no plan to protect: a fresh state alone restarts (from the
                # measured joints). This is the start-up with use_sim_time, where the first joint state can be
                # measured before /clock arrives and so looks stale at the first tick on the simulated clock.
                self._apply(
                    ExecutorEvent.FEEDBACK_LOST_BEFORE_FIRST_COMMAND
                    if self.status.commands == 0
                    else ExecutorEvent.FEEDBACK_LOST
                )
                self.timeline.clear()  # never resume towards an old target
                self.status.chunks_in_force = 0
                self._last_accept_s = None
                self.status.joint_state_losses += 1
                self.status.problems[JOINT_STATE_PROBLEM] = (
                    f"no fresh joint state within joint_state_timeout_s {self.config.joint_state_timeout_s:g} s (the "
                    f"last one measured at t={self._measured_s:.3f} s): sending no commands, chunks dropped; commands "
                    "resume with a fresh state and a new chunk"
                )
            self.status.activity = TickActivity.JOINT_STATE_LOST
            return False
        self.status.problems.pop(JOINT_STATE_PROBLEM, None)  # fresh state: the loss is over
        if self._state not in FEEDBACK_LOST:
            return True
        if self._state not in RESTART_GRANTED:  # fresh, but no chunk or ~/resume since the loss: the table keeps it
            self._apply(ExecutorEvent.FEEDBACK_FRESH)
            self.status.activity = self._not_following_activity() or TickActivity.WAITING_FOR_CHUNK
            return False
        q, g = self._measured  # fresh state and a chunk accepted after it: start from where the arm is
        self._reseed(q, g if np.isfinite(g) else self._g_cmd)
        self._apply(ExecutorEvent.FEEDBACK_FRESH)
        return True

    def tick(self, now_s: float) -> JointCommand | None:
        """Compute the command for time ``now_s``; None (send nothing) while the arm's joint state is unknown or stale
        (and after that until a new chunk), and while disengaged since the start. The steps, in order: notice a
        clock jump, the watchdog, the target of the timeline, smoothing, the safety filter, the final check."""
        t_start = time.perf_counter()
        with self._lock:
            self.status.ticks += 1
            self._notice_time_jump(now_s)
            if self._q_cmd is None:  # not seeded: no measured state yet, or none since the clock jumped back
                self.status.activity = TickActivity.WAITING_FOR_JOINT_STATE
                return None
            if self.config.joint_state_timeout_s is not None and not self._feedback_ok(now_s):
                self.status.last_tick_compute_s = time.perf_counter() - t_start
                return None
            if self._state in NOT_ENGAGED_YET:  # disengaged since the start: the arm is not ours, send nothing
                self.status.activity = TickActivity.DISENGAGED
                self.status.last_tick_compute_s = time.perf_counter() - t_start
                return None
            q_prev, g_prev = self._q_cmd, self._g_cmd
            q_des, g_des, activity = self._target(now_s, q_prev, g_prev)
            holding = activity is not TickActivity.TRACKING
            if self.smoother is not None:
                if holding:
                    self.smoother.reset(q_prev)
                    q_des = q_prev
                else:
                    q_des = self.smoother.step(q_des)
            q_new, g_new, g_prev, gripper_known = self._limited(
                q_des, g_des, q_prev, g_prev, hold=holding and activity is not TickActivity.HOLD_UNREACHABLE
            )
            command = self._emit(now_s, q_new, g_new, q_prev, g_prev, gripper_known, activity)
            self.status.last_tick_compute_s = time.perf_counter() - t_start
            return command

    def _notice_time_jump(self, now_s: float) -> None:
        """Under the lock: a clock jump nobody announced (module docstring) drops everything timed on the old clock."""
        cfg = self.config
        if self._last_tick_s is not None and now_s <= self._last_tick_s - TIME_JUMP_BACK_MIN_S:
            self._forget_time(f"tick at t={now_s:.3f} s after a tick at t={self._last_tick_s:.3f} s")
        elif (
            cfg.joint_state_timeout_s is not None
            and self._measured_s is not None
            and self._measured_s >= now_s + TIME_JUMP_BACK_MIN_S
        ):
            # measured on the old clock, before a jump back (passed in as the jump was handled): not a fresh state
            self._forget_time(f"joint state measured at t={self._measured_s:.3f} s, after the tick at t={now_s:.3f} s")
        self._last_tick_s = now_s

    def _target(self, now_s: float, q_prev: np.ndarray, g_prev: float) -> tuple[np.ndarray, float, TickActivity]:
        """Under the lock: the desired (joints, gripper) and activity of this tick: the timeline's pose due at
        ``now + lookahead`` through IK, or a hold (stopped, stale, nothing due, unreachable)."""
        cfg = self.config
        if self._state in IGNORES_CHUNKS:
            return q_prev, g_prev, TickActivity.STOPPED
        if self._state in HOLDS_UNCERTAIN:
            return q_prev, g_prev, TickActivity.HOLD_UNCERTAIN
        stale = self.status.activity is TickActivity.HOLD_STALE
        if self._last_accept_s is not None and now_s - self._last_accept_s > cfg.stale_timeout_s:
            if len(self.timeline):
                self.timeline.clear()
            stale = True
        self.timeline.prune(now_s)
        sampled = self.timeline.sample(self._sample_time_s(now_s))
        self.status.chunks_in_force = len(self.timeline)
        if sampled is None:
            return q_prev, g_prev, TickActivity.HOLD_STALE if stale else TickActivity.IDLE
        target, _ = sampled
        ik = self.kin.ik(
            make_matrix(target.position_m, target.quat_xyzw), self._q_seed if self._q_seed is not None else q_prev
        )
        if ik.ok:
            self._q_seed = ik.q_rad
            return ik.q_rad, target.gripper, TickActivity.TRACKING
        self.status.ik_failures += 1
        self.status.last_ik_error = (
            f"target {np.round(target.position_m, 4).tolist()} unreachable: IK error "
            f"{ik.position_error_m * 1000:.1f} mm / {np.degrees(ik.rotation_error_rad):.1f} deg ({cfg.unreachable})"
        )
        if cfg.unreachable == "best_effort":
            self._q_seed = ik.q_rad
            return ik.q_rad, target.gripper, TickActivity.TRACKING
        return q_prev, target.gripper, TickActivity.HOLD_UNREACHABLE

    def _limited(
        self, q_des: np.ndarray, g_des: float, q_prev: np.ndarray, g_prev: float, hold: bool
    ) -> tuple[np.ndarray, float, float, bool]:
        """Under the lock: the command after the safety filter and the final independent check (a hold repeats the
        previous command) -> (joints, gripper, the previous gripper it was limited against, gripper known).

        An unmeasured gripper (NaN) takes the first chunk target as its first command; until then the filter and the
        check run on a placeholder (the command carries NaN then: no gripper command)."""
        gripper_known = bool(np.isfinite(g_prev))
        if not gripper_known and np.isfinite(g_des):
            g_prev = float(np.clip(g_des, self.limits.gripper_min, self.limits.gripper_max))
            gripper_known = True
        if not gripper_known:
            g_prev = g_des = self.limits.gripper_min
        if hold:
            q_new, g_new, report = q_prev.copy(), g_prev, FilterReport()
        else:
            safety = self.slow_safety if self._state in SLOWED else self.safety
            q_new, g_new, report = safety.apply(q_des, g_des, q_prev, g_prev, self.config.period_s)
        if report.any:
            self.status.limit_events += 1
            self.status.last_limit_event = ", ".join(
                name
                for name in ("joint_clipped", "joint_speed_limited", "ee_limited", "gripper_limited")
                if getattr(report, name)
            )
        problems = check_command(self.limits, q_new, g_new, q_prev, g_prev, self.config.period_s, self.kin.fk_position)
        if problems:
            self.status.check_failures += 1
            self.status.last_check_failure = "; ".join(problems)
            q_new, g_new = q_prev.copy(), g_prev
        return q_new, g_new, g_prev, gripper_known

    def _emit(
        self,
        now_s: float,
        q_new: np.ndarray,
        g_new: float,
        q_prev: np.ndarray,
        g_prev: float,
        gripper_known: bool,
        activity: TickActivity,
    ) -> JointCommand:
        """Under the lock: record the command as sent and build it (NaN gripper while the gripper is unknown)."""
        moving = bool(np.any(q_new != q_prev) or g_new != g_prev)
        if not gripper_known:
            g_new = float("nan")
        self._q_cmd, self._g_cmd = q_new, g_new
        self.status.activity = activity
        self.status.commands += 1
        self.status.last_command_stamp_s = now_s
        return JointCommand(now_s, self._lookahead_s(), q_new.copy(), float(g_new), self.kin.fk(q_new), moving)
