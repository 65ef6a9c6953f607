"""Calibration flange poses, diverse in rotation, for the ``capture`` command (which keeps those its IK reaches
within the joint limits).

Why this spread. A hand-eye solution is only determined when the flange rotates between samples about at least two
non-parallel axes (about one axis only, the translation along it is unobservable), and its error shrinks as the
rotations between samples grow (Tsai & Lenz 1989: the rotation error goes as 1 / the angle between stations) and
as their axes spread. So every pose after the first faces the board to the camera and then:

* tilts it by 15-30 degrees (``tilt_min_deg``..``tilt_max_deg``, cycling through three magnitudes) about an axis
  in the board's (or the camera's image) plane whose direction turns by the golden angle (137.5 degrees) from one
  pose to the next, so the tilt axes cover every direction of that plane evenly for any number of poses;
* yaws it about the viewing axis by up to +-30 degrees (``yaw_max_deg``), the third axis.

Above ~15 degrees the relative rotations are large against the PnP pose noise; beyond ~30-35 degrees of tilt the
ChArUco markers foreshorten enough that detection and corner accuracy drop and the wrist nears its limits. The
default of 15 poses gives 105 pairs of relative motions: the closed-form solvers average their noise over them,
the refinement's error goes as 1 / sqrt(N) beyond that, and capture takes about a minute at a few seconds per pose
(12-20 is the useful range; the solver refuses fewer than 6).

Positions: eye-to-hand places the flange at low-discrepancy (Halton) points of the inner 80 % of the workspace box,
the first at its centre; eye-in-hand keeps the camera ``viewing_distance_m`` from the board's centre, on the cone
the tilt makes around the board's normal, and drops candidates whose flange leaves the box. Orientations stay as
close as possible to a reference flange pose (the smallest rotation that makes the board / camera face the other),
so the poses sit near a posture the arm reaches comfortably.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.errors import CalibrationError
from para_core.model.rotations import check_rigid, invert_rigid

GOLDEN_ANGLE_DEG = 180.0 * (3.0 - math.sqrt(5.0))  # 137.5...


@dataclass(frozen=True)
class PoseGenerationConfig:
    """How many calibration poses and how much they rotate.

    Args:
        n_poses: number of poses (12-20 recommended; at least 6).
        tilt_min_deg / tilt_max_deg: tilt of the board (eye-to-hand) or of the camera's view (eye-in-hand) away
            from facing, in degrees; the poses cycle through three magnitudes between them.
        yaw_max_deg: largest rotation about the viewing axis, degrees.
        workspace_fill: fraction of the workspace box the eye-to-hand positions spread over (centred).
        aim_offset_m: eye-in-hand: the camera aims at points up to this far from the board's centre (in the board
            plane), so the board is seen at different places in the image.
        distance_spread: eye-in-hand: the viewing distance varies by up to this fraction either way.
    """

    n_poses: int = 15
    tilt_min_deg: float = 15.0
    tilt_max_deg: float = 30.0
    yaw_max_deg: float = 30.0
    workspace_fill: float = 0.8
    aim_offset_m: float = 0.03
    distance_spread: float = 0.15

    def __post_init__(self) -> None:
        if isinstance(self.n_poses, bool) or not isinstance(self.n_poses, (int, np.integer)) or self.n_poses < 6:
            raise CalibrationError(
                f"PoseGenerationConfig.n_poses = {self.n_poses!r} is invalid: give at least 6 (12-20 recommended)"
            )
        if not 0.0 < self.tilt_min_deg <= self.tilt_max_deg < 60.0:
            raise CalibrationError(
                f"PoseGenerationConfig tilt range [{self.tilt_min_deg}, {self.tilt_max_deg}] deg is "
                "invalid: give 0 < tilt_min_deg <= tilt_max_deg < 60 (15 and 30 recommended)"
            )
        if not 0.0 <= self.yaw_max_deg <= 90.0:
            raise CalibrationError(f"PoseGenerationConfig.yaw_max_deg = {self.yaw_max_deg!r} is invalid: give 0..90")
        if not 0.0 <= self.aim_offset_m < 1.0:
            raise CalibrationError(
                f"PoseGenerationConfig.aim_offset_m = {self.aim_offset_m!r} is invalid: give metres "
                "in [0, 1) (a few centimetres; the board must stay in view)"
            )
        if not 0.0 <= self.distance_spread < 0.5:
            raise CalibrationError(
                f"PoseGenerationConfig.distance_spread = {self.distance_spread!r} is invalid: give "
                "a fraction in [0, 0.5)"
            )
        if not 0.0 < self.workspace_fill <= 1.0:
            raise CalibrationError(
                f"PoseGenerationConfig.workspace_fill = {self.workspace_fill!r} is invalid: give a fraction in (0, 1]"
            )


def view_pattern(count: int, config: PoseGenerationConfig) -> np.ndarray:
    """(count, 3) (tilt-axis azimuth, tilt, yaw) in radians of the pattern in the module docstring: pose 0 faces
    straight on; pose k > 0 tilts about the in-plane axis at azimuth (k - 1) * 137.5 deg by one of three magnitudes
    in [tilt_min_deg, tilt_max_deg] and yaws by yaw_max_deg times +1, -1, +0.5, -0.5, 0 in turn."""
    tilts = np.linspace(config.tilt_min_deg, config.tilt_max_deg, 3)
    yaw_cycle = np.array([1.0, -1.0, 0.5, -0.5, 0.0])
    out = np.zeros((count, 3))
    for k in range(1, count):
        out[k] = (
            math.radians(GOLDEN_ANGLE_DEG * (k - 1)),
            math.radians(tilts[(k - 1) % 3]),
            math.radians(config.yaw_max_deg * yaw_cycle[(k - 1) % 5]),
        )
    return out  # (count, 3)


def _tilt(azimuth: float, tilt: float) -> np.ndarray:
    return Rotation.from_rotvec(np.array([math.cos(azimuth), math.sin(azimuth), 0.0]) * tilt).as_matrix()


def _yaw(yaw: float) -> np.ndarray:
    return Rotation.from_rotvec([0.0, 0.0, yaw]).as_matrix()


def view_rotations(count: int, config: PoseGenerationConfig) -> np.ndarray:
    """(count, 3, 3) rotations of :func:`view_pattern` in the facing frame (z = viewing axis): yaw after tilt."""
    return np.stack([_yaw(yaw) @ _tilt(azimuth, tilt) for azimuth, tilt, yaw in view_pattern(count, config)])


def _align(R_ref: np.ndarray, z_target: np.ndarray) -> np.ndarray:
    """The rotation nearest ``R_ref`` (3, 3) whose z axis is ``z_target``: the smallest rotation taking R_ref's z
    axis onto it, applied to R_ref."""
    z_ref = R_ref[:, 2]
    z_target = z_target / np.linalg.norm(z_target)
    axis = np.cross(z_ref, z_target)
    sin, cos = np.linalg.norm(axis), float(np.dot(z_ref, z_target))
    if sin < 1e-12:
        turn = np.eye(3) if cos > 0 else Rotation.from_rotvec(R_ref[:, 0] * math.pi).as_matrix()
    else:
        turn = Rotation.from_rotvec(axis / sin * math.atan2(sin, cos)).as_matrix()
    return turn @ R_ref


def _halton(index: int, base: int) -> float:
    result, f = 0.0, 1.0
    while index > 0:
        f /= base
        result += f * (index % base)
        index //= base
    return result


def _box(workspace_min_m, workspace_max_m) -> tuple[np.ndarray, np.ndarray]:
    lo = np.asarray(workspace_min_m, dtype=np.float64).reshape(3)
    hi = np.asarray(workspace_max_m, dtype=np.float64).reshape(3)
    if not np.all(np.isfinite(lo)) or not np.all(np.isfinite(hi)) or np.any(hi <= lo):
        raise CalibrationError(
            f"workspace box [{lo.tolist()}, {hi.tolist()}] is invalid: give min < max on x, y, z (metres, in base)"
        )
    return lo, hi


def _rigid(T, name: str) -> np.ndarray:
    try:
        return check_rigid(T, name=name)
    except ValueError as exc:
        raise CalibrationError(str(exc)) from exc


def eye_to_hand_flange_poses(
    T_base_cam,
    T_flange_board,
    T_base_flange_reference,
    workspace_min_m,
    workspace_max_m,
    config: PoseGenerationConfig | None = None,
    spec: CharucoBoardSpec | None = None,
) -> np.ndarray:
    """(N, 4, 4) flange poses ``T_base_flange`` for calibrating a fixed camera with the board on the flange.

    :param T_base_cam: the camera's approximate pose (its nominal or CAD pose is enough).
    :param T_flange_board: how the board is mounted on the flange (approximately).
    :param T_base_flange_reference: a flange pose the arm reaches comfortably; orientations stay near it.
    :param workspace_min_m / workspace_max_m: (3,) box (metres, base) the flange positions stay in.
    :param spec: the board (its centre is what faces the camera); default: the board frame's origin.
    """
    config = config or PoseGenerationConfig()
    T_base_cam = _rigid(T_base_cam, "T_base_cam")
    T_flange_board = _rigid(T_flange_board, "T_flange_board")
    T_ref = _rigid(T_base_flange_reference, "T_base_flange_reference")
    lo, hi = _box(workspace_min_m, workspace_max_m)
    centre_board = np.zeros(3) if spec is None else np.array([*spec.size_m, 0.0]) / 2.0
    cam_xyz = T_base_cam[:3, 3]
    R_ref_board = T_ref[:3, :3] @ T_flange_board[:3, :3]
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0 * config.workspace_fill
    poses = []
    for k, R_view in enumerate(view_rotations(config.n_poses, config)):
        unit = np.array([_halton(k, 2), _halton(k, 3), _halton(k, 5)]) if k else np.full(3, 0.5)
        flange_xyz = mid + (2.0 * unit - 1.0) * half
        R_flange = T_ref[:3, :3]
        for _ in range(50):  # the board centre depends on the orientation: fixed-point steps (converge in ~10)
            board_centre = flange_xyz + R_flange @ (T_flange_board[:3, :3] @ centre_board + T_flange_board[:3, 3])
            R_board = _align(R_ref_board, board_centre - cam_xyz) @ R_view  # z away from the camera, then the view
            R_new = R_board @ T_flange_board[:3, :3].T
            converged = np.max(np.abs(R_new - R_flange)) < 1e-13
            R_flange = R_new
            if converged:
                break
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R_flange, flange_xyz
        poses.append(T)
    return np.stack(poses)  # (N, 4, 4)


def eye_in_hand_flange_poses(
    T_base_board,
    T_flange_cam,
    T_base_flange_reference,
    workspace_min_m,
    workspace_max_m,
    viewing_distance_m: float,
    config: PoseGenerationConfig | None = None,
    spec: CharucoBoardSpec | None = None,
) -> np.ndarray:
    """(N, 4, 4) flange poses ``T_base_flange`` for calibrating the wrist camera with the board fixed in the scene.

    The camera stays ``viewing_distance_m`` from the board's centre, looking at it, from directions tilted away from
    the board's normal as :func:`view_rotations` says; candidates whose flange leaves the box are skipped.

    :param T_base_board: the board's approximate pose (board z points into the table for a board lying face up).
    :param T_flange_cam: the wrist camera's approximate mount (CAD).
    :raises CalibrationError: fewer than ``n_poses`` candidates keep the flange in the box.
    """
    config = config or PoseGenerationConfig()
    T_base_board = _rigid(T_base_board, "T_base_board")
    T_flange_cam = _rigid(T_flange_cam, "T_flange_cam")
    T_ref = _rigid(T_base_flange_reference, "T_base_flange_reference")
    lo, hi = _box(workspace_min_m, workspace_max_m)
    if not math.isfinite(viewing_distance_m) or viewing_distance_m <= 0.0:
        raise CalibrationError(f"viewing_distance_m = {viewing_distance_m!r} is invalid: give a positive distance")
    centre_board = np.zeros(3) if spec is None else np.array([*spec.size_m, 0.0]) / 2.0
    centre = T_base_board[:3, :3] @ centre_board + T_base_board[:3, 3]  # (3,) in base
    R_ref_cam = T_ref[:3, :3] @ T_flange_cam[:3, :3]
    T_cam_flange = invert_rigid(T_flange_cam)
    max_candidates = 20 * config.n_poses
    aim_cycle = np.array([1.0, 0.0, 0.6, 0.3])  # lengths 4 and 7: out of step with the tilts (3) and yaws (5)
    distance_cycle = np.array([0.0, 1.0, -1.0, 0.5, -0.5, 1.0, -1.0])
    poses = []
    for k, (azimuth, tilt, yaw) in enumerate(view_pattern(max_candidates, config)):
        view_dir = T_base_board[:3, :3] @ _tilt(azimuth, tilt)[:, 2]  # camera -> board, tilted off the normal
        # Aim off-centre and vary the distance: with every view through one point at one distance, a mount rotation
        # about that point would move the image only through the board's tilt, and be poorly determined.
        aim_angle = math.radians(GOLDEN_ANGLE_DEG * 2.0 * k + 45.0)
        aim_board = (
            np.array([math.cos(aim_angle), math.sin(aim_angle), 0.0])
            * config.aim_offset_m
            * (aim_cycle[k % 4] if k else 0.0)
        )
        distance = viewing_distance_m * (1.0 + config.distance_spread * (distance_cycle[k % 7] if k else 0.0))
        cam_xyz = centre + T_base_board[:3, :3] @ aim_board - distance * view_dir
        R_cam = _align(R_ref_cam, view_dir) @ _yaw(yaw)  # face the board, then roll about the optical axis
        T_base_cam = np.eye(4)
        T_base_cam[:3, :3], T_base_cam[:3, 3] = R_cam, cam_xyz
        T = T_base_cam @ T_cam_flange
        if np.all(T[:3, 3] >= lo) and np.all(T[:3, 3] <= hi):
            poses.append(T)
        if len(poses) == config.n_poses:
            return np.stack(poses)  # (N, 4, 4)
    raise CalibrationError(
        f"only {len(poses)} of {config.n_poses} eye-in-hand poses keep the flange inside the workspace box "
        f"[{lo.tolist()}, {hi.tolist()}] at {viewing_distance_m} m from the board: move the board nearer the arm, "
        "shorten viewing_distance_m or enlarge the box"
    )
