"""Following ``trajectory_msgs/JointTrajectory`` commands the way a ros2_control joint trajectory controller does.

ROS-free (numbers in, numbers out); ``sim_node`` converts the message and feeds this module.

Semantics (a simple, documented subset of ``joint_trajectory_controller``):

* Joints are matched by name; a trajectory may name a subset of the command joints (the others keep their
  current setpoints). Unknown names, duplicates, empty name lists, points whose ``positions`` length differs from
  the name list, non-finite numbers, or ``time_from_start`` that is negative or not strictly increasing reject the
  WHOLE trajectory (:class:`TrajectoryRejected`, with the reason), and the arm keeps what it was doing.
* Positions outside the joint limits are clamped to them (reported as warnings, the trajectory is accepted).
* Start time: ``header.stamp`` = 0 means "start on receipt" (the ROS convention); a non-zero stamp is the start
  time on the node's clock. Before it the arm holds its setpoint. The trajectory starts from the setpoint at
  receipt and reaches point 0 at ``start + time_from_start[0]`` (a zero ``time_from_start`` there means "go now":
  the servos move as fast as they can). Points whose time is already past at receipt are dropped. Like the real
  controller, a trajectory with a non-zero stamp whose LAST point is already in the past on receipt is rejected
  (the arm keeps what it was doing): a late command must not make the arm jump to a stale target.
* Between points positions are interpolated linearly in time (velocities/accelerations in the message are ignored).
  After the last point the arm holds it.
* A new trajectory replaces the current one at once; an empty one (no points) holds the current setpoint (stop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class TrajectoryRejected(ValueError):
    """A trajectory that cannot be followed; the message says why and what to fix."""


@dataclass
class TrajectoryPlan:
    """A validated trajectory on the command joints, in absolute time (nanoseconds on the node's clock).

    ``times_ns[0]`` is the anchor (the setpoint at receipt, or at a future start); row i of ``positions`` is reached
    at ``times_ns[i]``.
    """

    joint_indices: np.ndarray  # (J,) indices into the command joint vector
    times_ns: np.ndarray  # (P + 1,) int64, non-decreasing
    positions: np.ndarray  # (P + 1, J)


def plan_trajectory(
    joint_names: Sequence[str],
    times_from_start_s: Sequence[float],
    positions: Sequence[Sequence[float]],
    *,
    command_joint_names: Sequence[str],
    q_lower: np.ndarray,
    q_upper: np.ndarray,
    setpoint_now: np.ndarray,
    now_ns: int,
    start_ns: int = 0,
) -> tuple[TrajectoryPlan | None, list[str]]:
    """Validate a trajectory and turn it into a :class:`TrajectoryPlan`.

    :param joint_names: the message's ``joint_names``.
    :param times_from_start_s: each point's ``time_from_start`` in seconds.
    :param positions: each point's ``positions``.
    :param command_joint_names: names of the command vector (e.g. joint1..joint6, gripper).
    :param q_lower: lower limits of the command vector; ``q_upper``: upper limits.
    :param setpoint_now: the command vector's current setpoint (where the trajectory starts from).
    :param now_ns: current time on the node's clock, nanoseconds.
    :param start_ns: ``header.stamp`` in nanoseconds (0: start now).
    :returns: (plan, warnings); plan is None for an empty trajectory (= hold the current setpoint).
    :raises TrajectoryRejected: for anything in the module docstring's rejection list, and for a non-zero
        ``start_ns`` whose last point lies before ``now_ns``.
    """
    names = list(joint_names)
    index_of = {n: i for i, n in enumerate(command_joint_names)}
    if not names:
        raise TrajectoryRejected(
            f"joint_names is empty; name the joints you command (any of {', '.join(command_joint_names)})"
        )
    unknown = [n for n in names if n not in index_of]
    if unknown:
        raise TrajectoryRejected(f"unknown joint name(s) {unknown}; this arm has {', '.join(command_joint_names)}")
    if len(set(names)) != len(names):
        raise TrajectoryRejected(f"joint_names {names} has duplicates; name each joint once")
    if len(times_from_start_s) != len(positions):
        raise TrajectoryRejected(f"{len(positions)} position rows but {len(times_from_start_s)} times")
    if len(positions) == 0:
        return None, []
    rows = []
    for i, row in enumerate(positions):
        if len(row) != len(names):
            raise TrajectoryRejected(
                f"point {i} has {len(row)} positions for {len(names)} joint names; give one position per named joint"
            )
        rows.append([float(v) for v in row])
    pos = np.asarray(rows, dtype=np.float64)  # (P, J)
    times = np.asarray([float(t) for t in times_from_start_s], dtype=np.float64)  # (P,)
    if not np.all(np.isfinite(pos)):
        bad = np.argwhere(~np.isfinite(pos))[0]
        raise TrajectoryRejected(
            f"point {bad[0]} joint {names[bad[1]]!r} position is {pos[tuple(bad)]}; positions must be finite"
        )
    if not np.all(np.isfinite(times)) or np.any(times < 0):
        raise TrajectoryRejected(f"time_from_start {times.tolist()} must be finite and >= 0")
    if np.any(np.diff(times) <= 0):
        raise TrajectoryRejected(f"time_from_start {times.tolist()} must be strictly increasing")

    idx = np.array([index_of[n] for n in names])  # (J,)
    lo, hi = np.asarray(q_lower)[idx], np.asarray(q_upper)[idx]  # (J,)
    warnings = []
    clipped = np.clip(pos, lo, hi)  # (P, J)
    if not np.array_equal(clipped, pos):
        for j in np.unique(np.argwhere(clipped != pos)[:, 1]):
            worst = pos[:, j][np.argmax(np.abs(pos[:, j] - clipped[:, j]))]
            warnings.append(
                f"joint {names[j]!r} position {worst:.4f} is outside [{lo[j]:.4f}, {hi[j]:.4f}]; clamped to the limit"
            )
    pos = clipped

    start = int(start_ns) if start_ns else int(now_ns)
    abs_ns = start + np.round(times * 1e9).astype(np.int64)  # (P,)
    if abs_ns[-1] < now_ns:  # only possible with a non-zero stamp (stamp 0 starts now)
        raise TrajectoryRejected(
            f"trajectory ends in the past: header.stamp {start_ns / 1e9:.6f} s + last time_from_start "
            f"{times[-1]:.6f} s = {abs_ns[-1] / 1e9:.6f} s is {(now_ns - abs_ns[-1]) / 1e9:.6f} s before now "
            f"({now_ns / 1e9:.6f} s); stamp it 0 to start on receipt, or with a time on this node's clock"
        )
    keep = abs_ns >= now_ns  # a point due exactly now (time_from_start 0, no stamp) is "go there now"
    anchor_ns = max(start, int(now_ns))
    times_ns = np.concatenate([[anchor_ns], np.maximum(abs_ns[keep], anchor_ns)])  # (P' + 1,)
    start_row = np.asarray(setpoint_now, dtype=np.float64)[idx]  # (J,)
    positions_out = np.vstack([start_row, pos[keep]])  # (P' + 1, J)
    return TrajectoryPlan(idx, times_ns.astype(np.int64), positions_out), warnings


class TrajectoryFollower:
    """Holds the current plan and gives the command vector's setpoint at any time.

    :param setpoint: initial setpoint of the whole command vector (7,).
    """

    def __init__(self, setpoint: np.ndarray):
        self._hold = np.array(setpoint, dtype=np.float64)  # (7,) setpoint of joints not in the plan
        self.plan: TrajectoryPlan | None = None

    def setpoint_at(self, now_ns: int) -> np.ndarray:
        """The setpoint (7,) at ``now_ns``: interpolated along the plan, held before/after it."""
        q = self._hold.copy()
        plan = self.plan
        if plan is None:
            return q
        t = plan.times_ns
        if now_ns >= t[-1]:  # checked first: a zero-length plan (point due now) is at its end at once
            q[plan.joint_indices] = plan.positions[-1]
        elif now_ns <= t[0]:
            q[plan.joint_indices] = plan.positions[0]
        else:
            k = int(np.searchsorted(t, now_ns, side="right")) - 1  # segment [t_k, t_k+1)
            span = t[k + 1] - t[k]
            s = 0.0 if span <= 0 else (now_ns - t[k]) / span
            q[plan.joint_indices] = (1.0 - s) * plan.positions[k] + s * plan.positions[k + 1]
        return q

    def replace(self, plan: TrajectoryPlan | None, now_ns: int) -> None:
        """Switch to ``plan`` (None: hold the setpoint at ``now_ns``)."""
        self._hold = self.setpoint_at(now_ns)
        self.plan = plan

    def is_done(self, now_ns: int) -> bool:
        """True when there is no plan or its last point's time has passed."""
        return self.plan is None or now_ns >= self.plan.times_ns[-1]
