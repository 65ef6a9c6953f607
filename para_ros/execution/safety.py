"""An arm's safety limits and the filter that makes every command satisfy them, for any joint count.

Limits (the arm description's ``limits``: ``config/yam.yaml`` for the YAM): joint position range, joint speed, tool (grasp_site) speed, a workspace
box for the tool, gripper range and gripper speed. :class:`SafetyFilter` turns a desired joint target into the
nearest command that satisfies all of them *relative to the previous command*:

1. joint targets are clipped into the joint range (widened to include the previous command, so an arm that starts
   outside its range may move back in but never further out);
2. the joint step is scaled down uniformly (direction kept) until every joint moves at most
   ``max_joint_speed_rad_s * dt``;
3. along that joint-space step, the largest fraction ``alpha`` in [0, 1] is kept for which FK of the command lies in
   the workspace box (or, if the previous command was outside, no farther from it) and the tool moves at most
   ``max_ee_speed_m_s * dt`` (bisection; only verified fractions are used, alpha = 0 is always valid);
4. the gripper is clipped into its range and rate-limited.

:func:`check_command` re-checks a command against the limits independently of the filter; the executor calls it
as the last gate before sending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from para_ros.robot.arm import WORKSPACE_TOL_M, ArmLimits

JOINT_TOL_RAD = 1e-9
SPEED_TOL = 1e-6  # relative slack on speed limits (floating point only)


@dataclass
class FilterReport:
    """What the safety filter changed on one tick (all False: the target passed untouched)."""

    joint_clipped: bool = False
    joint_speed_limited: bool = False
    ee_limited: bool = False
    gripper_limited: bool = False

    @property
    def any(self) -> bool:
        return self.joint_clipped or self.joint_speed_limited or self.ee_limited or self.gripper_limited


class SafetyFilter:
    """Project a desired (joints, gripper) command onto the limits, relative to the previous command.

    :param limits: the arm's limits (n joints).
    :param fk_position: maps (n,) joint angles to the (3,) tool-site position in the world frame.
    :param bisection_steps: iterations of the workspace/EE-speed bisection (resolution 2^-n of the step).
    """

    def __init__(self, limits: ArmLimits, fk_position: Callable[[np.ndarray], np.ndarray], bisection_steps: int = 12):
        self.limits = limits
        self.fk_position = fk_position
        self.bisection_steps = bisection_steps

    def _ee_ok(self, p: np.ndarray, p_prev: np.ndarray, prev_outside_m: float, dt_s: float) -> bool:
        lim = self.limits
        # strict here (no tolerance): the filter's output must pass check_command, which allows rounding slack
        if prev_outside_m == 0.0:
            if not lim.in_workspace(p, tol_m=0.0):
                return False
        elif lim.distance_outside_workspace_m(p) > prev_outside_m:
            return False
        return bool(np.linalg.norm(p - p_prev) <= lim.max_ee_speed_m_s * dt_s)

    def apply(
        self, q_target: np.ndarray, gripper_target: float, q_prev: np.ndarray, gripper_prev: float, dt_s: float
    ) -> tuple[np.ndarray, float, FilterReport]:
        """Return the safe (n,) joint command, gripper command and what was limited.

        :param q_target: (n,) desired joints (after IK and smoothing).
        :param q_prev: (n,) previous command (assumed safe: it passed this filter).
        :param dt_s: time between the previous command and this one (one control period).
        """
        lim = self.limits
        report = FilterReport()
        q_target = np.asarray(q_target, dtype=float)
        q_prev = np.asarray(q_prev, dtype=float)
        n = lim.n_joints
        if q_target.shape != (n,) or q_prev.shape != (n,):
            raise ValueError(
                f"SafetyFilter: joints of shape {q_target.shape} (target) and {q_prev.shape} (previous) for an arm "
                f"of {n} joints: pass ({n},) vectors"
            )
        lower = np.minimum(lim.joint_lower_rad, q_prev)
        upper = np.maximum(lim.joint_upper_rad, q_prev)
        q = np.clip(q_target, lower, upper)  # (n,)
        report.joint_clipped = bool(np.any(q != q_target))
        dq = q - q_prev  # (n,)
        max_step = lim.max_joint_speed_rad_s * dt_s  # (n,)
        ratio = np.max(np.abs(dq) / max_step)
        if ratio > 1.0:
            dq = dq / ratio
            report.joint_speed_limited = True
        p_prev = self.fk_position(q_prev)
        prev_outside_m = lim.distance_outside_workspace_m(p_prev)
        if not self._ee_ok(self.fk_position(q_prev + dq), p_prev, prev_outside_m, dt_s):
            report.ee_limited = True
            lo, hi = 0.0, 1.0  # lo: verified ok, hi: known bad
            for _ in range(self.bisection_steps):
                mid = 0.5 * (lo + hi)
                if self._ee_ok(self.fk_position(q_prev + mid * dq), p_prev, prev_outside_m, dt_s):
                    lo = mid
                else:
                    hi = mid
            dq = lo * dq
        q_cmd = q_prev + dq
        g = float(np.clip(gripper_target, min(lim.gripper_min, gripper_prev), max(lim.gripper_max, gripper_prev)))
        g_step = lim.max_gripper_speed_per_s * dt_s
        g_cmd = float(np.clip(g, gripper_prev - g_step, gripper_prev + g_step))
        report.gripper_limited = g_cmd != float(gripper_target)
        return q_cmd, g_cmd, report


def check_command(
    limits: ArmLimits,
    q: np.ndarray,
    gripper: float,
    q_prev: np.ndarray,
    gripper_prev: float,
    dt_s: float,
    fk_position: Callable[[np.ndarray], np.ndarray],
) -> list[str]:
    """Every limit ``(q, gripper)`` breaks relative to the previous command (empty list: safe to send).

    Commands that stay outside a range the previous command was already outside of, without going further out, are
    accepted (the arm may start outside its box and must be able to come back).
    """
    problems = []
    q = np.asarray(q, dtype=float)
    q_prev = np.asarray(q_prev, dtype=float)
    if q.shape != (limits.n_joints,) or not np.all(np.isfinite(q)) or not np.isfinite(gripper):
        return [f"non-finite or mis-shaped command q={q!r} gripper={gripper!r}"]
    lower = np.minimum(limits.joint_lower_rad, q_prev) - JOINT_TOL_RAD
    upper = np.maximum(limits.joint_upper_rad, q_prev) + JOINT_TOL_RAD
    if np.any(q < lower) or np.any(q > upper):
        problems.append(f"joint position outside limits: q={np.round(q, 4).tolist()}")
    speed = np.abs(q - q_prev) / dt_s
    if np.any(speed > limits.max_joint_speed_rad_s * (1 + SPEED_TOL)):
        problems.append(f"joint speed {np.round(speed, 3).tolist()} rad/s above {limits.max_joint_speed_rad_s}")
    p, p_prev = fk_position(q), fk_position(q_prev)
    out_prev = limits.distance_outside_workspace_m(p_prev)
    out = limits.distance_outside_workspace_m(p)
    if out > max(out_prev, 0.0) + WORKSPACE_TOL_M:
        problems.append(f"tool at {np.round(p, 4).tolist()} is {out:.4f} m outside the workspace box")
    ee_speed = np.linalg.norm(p - p_prev) / dt_s
    if ee_speed > limits.max_ee_speed_m_s * (1 + SPEED_TOL):
        problems.append(f"tool speed {ee_speed:.3f} m/s above {limits.max_ee_speed_m_s}")
    if not (min(limits.gripper_min, gripper_prev) - 1e-9 <= gripper <= max(limits.gripper_max, gripper_prev) + 1e-9):
        problems.append(f"gripper {gripper} outside [{limits.gripper_min}, {limits.gripper_max}]")
    if abs(gripper - gripper_prev) / dt_s > limits.max_gripper_speed_per_s * (1 + SPEED_TOL):
        problems.append(
            f"gripper speed {abs(gripper - gripper_prev) / dt_s:.3f}/s above {limits.max_gripper_speed_per_s}"
        )
    return problems
