"""The arm poses ``para-calib capture`` visits: diverse rotations about a point the camera sees, inside every limit.

Why this spread. The hand-eye problem is degenerate unless the flange rotates about at least two non-parallel axes
between samples, and the translation is only as good as the rotations are large; but a rotated board must stay in the
camera's view and face it (detection fails beyond about 60 degrees of tilt). So every pose is the centre pose rotated
about a PIVOT that the camera sees (eye-to-hand: the board's centre on the flange; eye-in-hand: the point on the wrist
camera's optical axis at the viewing distance), which keeps the board near the image centre however the flange turns:

* rotation axes spread evenly over the sphere (a Fibonacci lattice, so every pair of consecutive poses turns about
  clearly different axes), angles alternating between the full ``angle_deg`` and half of it;
* a small translation of the pivot (up to ``offset_m``) on a fixed pattern, for depth and position diversity.

Default 12 poses at 25 degrees: 12 rotations about 12 axes give an over-determined, well-conditioned set (OpenCV's
hand-eye solvers need 3 at the very least) that takes about a minute to visit.

Each candidate becomes joints by IK (seeded with the previous pose) and is kept only if FK of those joints reaches it,
the joints are inside ``config/yam.yaml``'s joint range with a margin, and the tool site stays in its workspace box
at the pose and along the straight joint-space path from the previous kept pose. Rejected candidates are listed with
the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

JOINT_MARGIN_RAD = 0.05  # poses keep this far inside the joint range
PATH_CHECKS = 25  # samples of the joint-space path checked against the workspace box


@dataclass
class CapturePose:
    """One pose to visit: arm joints (n_joints,) rad, the flange pose (4, 4) in ``base`` and what produced it."""

    index: int
    q_rad: np.ndarray
    T_base_flange: np.ndarray
    axis: np.ndarray
    angle_deg: float
    offset_m: np.ndarray


@dataclass
class CapturePlan:
    """The poses kept and the candidates rejected (index, reason)."""

    poses: list[CapturePose]
    rejected: list[tuple[int, str]] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"{len(self.poses)} poses ({len(self.rejected)} candidates rejected)"]
        for p in self.poses:
            lines.append(
                f"  pose {p.index:2d}: rotate {p.angle_deg:5.1f} deg about "
                f"[{', '.join(f'{v:+.2f}' for v in p.axis)}], shift "
                f"[{', '.join(f'{1000 * v:+.0f}' for v in p.offset_m)}] mm; joints "
                f"[{', '.join(f'{v:+.3f}' for v in p.q_rad)}] rad"
            )
        for i, why in self.rejected:
            lines.append(f"  candidate {i:2d} rejected: {why}")
        return "\n".join(lines)


def fibonacci_axes(n: int) -> np.ndarray:
    """(n, 3) unit vectors spread evenly over the sphere."""
    i = np.arange(n) + 0.5
    z = 1.0 - 2.0 * i / n
    r = np.sqrt(np.maximum(0.0, 1.0 - z * z))
    phi = i * math.pi * (3.0 - math.sqrt(5.0))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def axis_angle_matrix(axis, angle_rad: float) -> np.ndarray:
    """(3, 3) rotation of ``angle_rad`` about unit ``axis`` (Rodrigues)."""
    k = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle_rad) * K + (1 - math.cos(angle_rad)) * K @ K


def candidate_flange_poses(
    T_base_flange_centre: np.ndarray, pivot_in_flange_m, n: int, angle_deg: float, offset_m: float
) -> list[tuple[np.ndarray, np.ndarray, float, np.ndarray]]:
    """``n`` flange poses (T (4, 4), axis, angle deg, offset (3,)) rotated about the pivot (see the module docstring).

    Rotation axes are in ``base``; the pivot is given in the flange frame of the centre pose.
    """
    if n < 1:
        raise ValueError(f"poses={n}: give at least 1 (3 is the least a hand-eye solve accepts)")
    T0 = np.asarray(T_base_flange_centre, dtype=np.float64)
    pivot = T0[:3, :3] @ np.asarray(pivot_in_flange_m, dtype=np.float64) + T0[:3, 3]  # (3,) in base
    shifts = np.array(
        [
            [1, 0, 0],
            [0, 1, 0],
            [0, 0, 1],
            [-1, 0, 0],
            [0, -1, 0],
            [0, 0, -1],
            [1, 1, 0],
            [-1, 0, 1],
            [0, -1, -1],
            [1, -1, 1],
            [-1, 1, -1],
            [0, 0, 0],
        ],
        dtype=np.float64,
    )
    shifts /= np.maximum(1.0, np.linalg.norm(shifts, axis=1, keepdims=True))
    out = []
    for k, axis in enumerate(fibonacci_axes(n)):
        angle = float(angle_deg) * (1.0 if k % 2 == 0 else 0.5)
        R = axis_angle_matrix(axis, math.radians(angle))
        d = float(offset_m) * shifts[k % len(shifts)]
        T = np.eye(4)
        T[:3, :3] = R @ T0[:3, :3]
        T[:3, 3] = R @ (T0[:3, 3] - pivot) + pivot + d
        out.append((T, axis, angle, d))
    return out


def plan_capture_poses(
    centre_q_rad,
    pivot_in_flange_m,
    yam,
    kinematics,
    T_flange_tool: np.ndarray,
    n: int = 12,
    angle_deg: float = 25.0,
    offset_m: float = 0.03,
) -> CapturePlan:
    """IK + limits of every candidate (see the module docstring).

    :param centre_q_rad: (n_joints,) joints of the centre pose (where the camera sees the board).
    :param yam: the arm description (:class:`para_ros.robot.arm.ArmDescription`: its ``limits``, ``n_joints``).
    :param kinematics: :class:`para_ros.robot.arm_kinematics.ArmKinematics` of the tool site.
    :param T_flange_tool: (4, 4) tool site in the flange (``gripper``) frame (the IK places the tool site).
    """
    lim = yam.limits
    lower = np.asarray(lim.joint_lower_rad) + JOINT_MARGIN_RAD
    upper = np.asarray(lim.joint_upper_rad) - JOINT_MARGIN_RAD
    n_joints = yam.n_joints
    q_prev = np.asarray(centre_q_rad, dtype=np.float64)[:n_joints]
    T_tool_flange = np.linalg.inv(T_flange_tool)
    T_centre = kinematics.fk(q_prev) @ T_tool_flange
    plan = CapturePlan([])
    for i, (T, axis, angle, d) in enumerate(
        candidate_flange_poses(T_centre, pivot_in_flange_m, n, angle_deg, offset_m)
    ):
        res = kinematics.ik(T @ T_flange_tool, q_prev)
        if not res.ok:
            res = kinematics.ik(T @ T_flange_tool, np.asarray(centre_q_rad, dtype=np.float64)[:n_joints])
        if not res.ok:
            plan.rejected.append(
                (
                    i,
                    f"unreachable (IK misses by {1000 * res.position_error_m:.1f} mm, "
                    f"{math.degrees(res.rotation_error_rad):.1f} deg)",
                )
            )
            continue
        q = res.q_rad
        if np.any(q < lower) or np.any(q > upper):
            plan.rejected.append(
                (
                    i,
                    f"joints {np.round(q, 3).tolist()} within {JOINT_MARGIN_RAD} rad of the "
                    "joint range of config/yam.yaml",
                )
            )
            continue
        path = [q_prev + (q - q_prev) * s for s in np.linspace(0.0, 1.0, PATH_CHECKS)]
        outside = max(lim.distance_outside_workspace_m(kinematics.fk_position(qs)) for qs in path)
        if outside > 0.0:
            plan.rejected.append(
                (i, f"the tool would leave the workspace box of config/yam.yaml by {1000 * outside:.0f} mm")
            )
            continue
        plan.poses.append(CapturePose(i, q.copy(), kinematics.fk(q) @ T_tool_flange, axis, angle, d))
        q_prev = q
    return plan
