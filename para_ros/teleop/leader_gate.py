"""The leader gate: when a leader arm may drive the follower, and where to. ROS-free.

Teleoperation here is one more source of action chunks for the unchanged chunk executor (the bridge,
:mod:`para_ros.teleop.bridge`, turns the gate's target into a chunk of the tool pose, FK of the target joints), so
every command still passes the executor's chunk checks, IK, safety filter (``config/yam.yaml``'s joint range, joint
speed, tool speed and workspace box), its joint-state watchdog, its stale-chunk hold and engage / disengage. What the
gate adds is the leader's side, one state of :class:`LeaderState` moved by the events of ONE table
(:data:`TRANSITIONS`), each change named:

- ``NO_LEADER``: no leader state yet, or the latest older than ``timeout_s``: nothing is sent, so the executor holds
  the follower (its chunk ends ``chunk_horizon_s`` after the last leader state; past ``stale_timeout_s`` it reports
  ``hold_stale``);
- ``SYNCING``: the leader is heard but does not agree with the follower: nothing is sent until every joint of the
  leader is within ``sync_tolerance_rad`` of the follower's measured joints (the operator brings the leader to the
  follower). Every start and every restart (after a loss or a jump) goes through here, so the follower never races to
  a leader pose far from where it stands;
- ``FOLLOWING``: each tick's leader joints (clamped into the follower's joint range: a leader beyond a limit puts the
  follower at that limit) are the target;
- a jump (any joint moving more than ``jump_rad`` between two consecutive leader states: a glitch, a reconnected
  leader, an encoder wrap) ends following at once: back to ``SYNCING``, the follower holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np


class LeaderState(Enum):
    """Whether the leader drives the follower (module docstring)."""

    NO_LEADER = "no_leader"
    SYNCING = "syncing"
    FOLLOWING = "following"


class LeaderEvent(Enum):
    """What moves the gate's state, at a tick."""

    LEADER_LOST = "leader_lost"  # no leader state within timeout_s
    LEADER_HEARD = "leader_heard"  # a fresh leader state, not in agreement with the follower (or no follower state)
    LEADER_AGREES = "leader_agrees"  # a fresh leader state within sync_tolerance_rad of the follower
    LEADER_JUMPED = "leader_jumped"  # a joint moved more than jump_rad since the previous leader state


S, E = LeaderState, LeaderEvent
TRANSITIONS: dict[tuple[LeaderState, LeaderEvent], LeaderState] = {
    (S.NO_LEADER, E.LEADER_LOST): S.NO_LEADER,
    (S.NO_LEADER, E.LEADER_HEARD): S.SYNCING,
    (S.NO_LEADER, E.LEADER_AGREES): S.FOLLOWING,
    (S.NO_LEADER, E.LEADER_JUMPED): S.SYNCING,  # (not reached: no previous state to jump from)
    (S.SYNCING, E.LEADER_LOST): S.NO_LEADER,
    (S.SYNCING, E.LEADER_HEARD): S.SYNCING,
    (S.SYNCING, E.LEADER_AGREES): S.FOLLOWING,
    (S.SYNCING, E.LEADER_JUMPED): S.SYNCING,
    (S.FOLLOWING, E.LEADER_LOST): S.NO_LEADER,
    (S.FOLLOWING, E.LEADER_HEARD): S.FOLLOWING,  # following: agreement is not asked again
    (S.FOLLOWING, E.LEADER_AGREES): S.FOLLOWING,
    (S.FOLLOWING, E.LEADER_JUMPED): S.SYNCING,
}
del S, E


@dataclass
class LeaderConfig:
    """How the gate judges the leader (units: rad, s).

    Args:
        timeout_s: a leader state older than this is a lost leader: chunks stop and the leader must agree with the
            follower again. Until then each chunk holds the last leader pose (never an extrapolation), so a longer
            timeout moves the follower no further; 0.5 s rides over the gaps a loaded machine puts into a 50 Hz
            leader stream (0.2 s lost the leader several times an episode on 2 busy cores, and a lagging follower
            then held until the leader came back to it).
        sync_tolerance_rad: the leader takes the follower only when every joint agrees within this (at the start, and
            after a loss or a jump).
        jump_rad: a joint change between two consecutive leader states larger than this is a jump (0.5 rad in one
            leader period, i.e. 25 rad/s at 50 Hz: no hand moves a leader that fast).
    """

    timeout_s: float = 0.5
    sync_tolerance_rad: float = 0.15
    jump_rad: float = 0.5

    def __post_init__(self):
        for name, lo, hi in (("timeout_s", 0.005, 10.0), ("sync_tolerance_rad", 0.001, 3.2), ("jump_rad", 0.01, 6.3)):
            value = getattr(self, name)
            if not (np.isfinite(value) and lo <= value <= hi):
                raise ValueError(f"leader {name}={value!r}: use [{lo:g}, {hi:g}]")


@dataclass(frozen=True)
class LeaderReading:
    """One leader state: arm joints (n,) rad in the follower's joint order, gripper 0 closed .. 1 open (NaN: the leader
    has none), and when it was read (the caller's clock, s)."""

    q_rad: np.ndarray
    gripper: float
    read_s: float


@dataclass(frozen=True)
class GateDecision:
    """A tick's outcome: ``q_target_rad`` (n,) and ``gripper`` to send (None: send nothing, the follower holds),
    the state, and why it is not following (empty while following)."""

    q_target_rad: np.ndarray | None
    gripper: float
    state: LeaderState
    reason: str = ""
    clamped: bool = False


class LeaderGate:
    """The gate's state and its rule (module docstring); one caller (the bridge's timer) at a time.

    :param config: the thresholds.
    :param joint_lower_rad, joint_upper_rad: (n,) the follower's joint range (``config/yam.yaml``'s limits).
    """

    def __init__(self, config: LeaderConfig, joint_lower_rad, joint_upper_rad):
        self.config = config
        self.lower = np.asarray(joint_lower_rad, dtype=float)  # (n,)
        self.upper = np.asarray(joint_upper_rad, dtype=float)  # (n,)
        self.state = LeaderState.NO_LEADER
        self.transitions: list[str] = []
        self.last_transition = ""
        self._previous: LeaderReading | None = None
        self.jumps = 0
        self.clamped_ticks = 0

    def _apply(self, event: LeaderEvent, why: str = "") -> None:
        after = TRANSITIONS[(self.state, event)]
        if after is not self.state:
            text = f"{self.state.value} --{event.value}--> {after.value}" + (f" ({why})" if why else "")
            self.transitions.append(text)
            self.last_transition = text
            self.state = after

    def update(self, reading: LeaderReading | None, follower_q_rad, now_s: float) -> GateDecision:
        """The decision at ``now_s`` from the latest leader ``reading`` (None: none yet) and the follower's measured
        joints ``follower_q_rad`` (n,) (None: unknown)."""
        cfg = self.config
        if reading is None or now_s - reading.read_s > cfg.timeout_s:
            age = "no leader state yet" if reading is None else f"last leader state {now_s - reading.read_s:.2f} s old"
            self._apply(LeaderEvent.LEADER_LOST, age)
            self._previous = None  # a jump is judged between consecutive states of one contact only
            return GateDecision(None, float("nan"), self.state, f"no leader: {age} (> {cfg.timeout_s:g} s)")
        q = np.asarray(reading.q_rad, dtype=float)  # (n,)
        previous, self._previous = self._previous, reading
        if previous is not None and previous.read_s < reading.read_s:
            step = np.abs(q - previous.q_rad)  # (n,)
            j = int(np.argmax(step))
            if step[j] > cfg.jump_rad:
                self.jumps += 1
                why = f"joint {j + 1} of the leader jumped {step[j]:.2f} rad between two states"
                self._apply(LeaderEvent.LEADER_JUMPED, why)
                return GateDecision(None, float("nan"), self.state, f"{why}: holding until the leader agrees again")
        q_target = np.clip(q, self.lower, self.upper)  # (n,)
        clamped = bool(np.any(q_target != q))
        self.clamped_ticks += int(clamped)
        if self.state is not LeaderState.FOLLOWING:
            if follower_q_rad is None:
                self._apply(LeaderEvent.LEADER_HEARD, "no follower state yet")
                return GateDecision(None, float("nan"), self.state, "waiting for the follower's joint state")
            diff = np.abs(q_target - np.asarray(follower_q_rad, dtype=float))  # (n,)
            j = int(np.argmax(diff))
            if diff[j] > cfg.sync_tolerance_rad:
                self._apply(LeaderEvent.LEADER_HEARD, "leader and follower differ")
                return GateDecision(
                    None,
                    float("nan"),
                    self.state,
                    f"move the leader to the follower: joint {j + 1} differs by {diff[j]:.2f} rad (> "
                    f"{cfg.sync_tolerance_rad:g} rad)",
                )
            self._apply(LeaderEvent.LEADER_AGREES, "leader within the sync tolerance of the follower")
        else:
            self._apply(LeaderEvent.LEADER_AGREES)
        return GateDecision(q_target, float(reading.gripper), self.state, "", clamped)
