"""Hand-eye calibration from ChArUco detections and flange poses.

Two cases, one model. With ``P`` the camera's pose in its parent frame, ``Q`` the board's pose in its parent frame
and ``M_i`` the arm's motion at sample i, every sample obeys ``T_cam_board_i = P^-1 @ M_i @ Q``:

* eye-to-hand (fixed scene camera, board on the flange): ``P = T_base_cam``, ``Q = T_flange_board``,
  ``M_i = T_base_flange_i``;
* eye-in-hand (camera on the flange, board fixed on the table): ``P = T_flange_cam``, ``Q = T_base_board``,
  ``M_i = T_flange_base_i = T_base_flange_i^-1``.

Initial guess: OpenCV's closed-form solvers, all of them, keeping the one with the lowest reprojection error.
``cv2.calibrateRobotWorldHandEye`` (Shah, Li) solves ``A_i X = Z B_i`` for both unknowns at once; with
``A_i = T_cam_board_i`` (PnP), ``B_i = M_i`` it gives ``X = Q^-1`` and ``Z = P^-1`` -- for eye-to-hand that means
passing the flange pose ``T_base_flange`` where OpenCV's eye-in-hand naming expects ``base2gripper``.
``cv2.calibrateHandEye`` (Tsai, Park, Horaud, Andreff, Daniilidis) solves ``G_i X C_i = const`` for one unknown;
with ``G_i = M_i^-1`` (the flange pose for eye-in-hand, its inverse for eye-to-hand, OpenCV's documented eye-to-hand
trick) and ``C_i = T_cam_board_i`` it gives ``X = P``, and ``Q`` is the rotation-averaged ``M_i^-1 P T_cam_board_i``.
Both families solve the hand-eye equations, which weigh every sample's PnP pose equally however noisy its depth is;
the refinement then minimises what was actually measured: the pixel distance between detected corners and corners
projected through ``P^-1 M_i Q`` (``cv2.projectPoints``, with the camera's distortion), over all samples jointly,
with ``scipy.optimize.least_squares`` on 12 parameters (a rotation vector and a translation for each unknown,
applied on the right of the initial guess so no parametrisation singularity is met).

Degenerate sets are refused with :class:`CalibrationError` before solving: too few samples with the board in view,
rotations about fewer than two non-parallel axes (the translation along a single rotation axis is unobservable),
a zero focal length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.detection import MIN_CORNERS, CharucoDetection, board_pose_from_detection, check_intrinsics
from para_core.calibration.errors import CalibrationError
from para_core.model.rotations import check_rigid, invert_rigid, quaternion_weighted_mean, rotation_angle_between

EYE_TO_HAND = "eye_to_hand"
EYE_IN_HAND = "eye_in_hand"
# (camera's parent frame, board's parent frame) per method, in the package's frame names.
PARENT_FRAMES = {EYE_TO_HAND: ("base", "gripper"), EYE_IN_HAND: ("gripper", "base")}


@dataclass(frozen=True)
class HandEyeSample:
    """One calibration sample.

    Args:
        T_base_flange: (4, 4) flange pose in base from the arm's kinematics at the moment of the image.
        detection: the ChArUco detection in the camera image; None when the board was not found (the sample is
            skipped and counted).
        K: (3, 3) camera matrix of the image.
        dist: (D,) OpenCV distortion coefficients, or None for none.
        image_size: (width, height) of the image in pixels (for the report and the overlay).
    """

    T_base_flange: np.ndarray
    detection: CharucoDetection | None
    K: np.ndarray
    dist: np.ndarray | None = None
    image_size: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class HandEyeConfig:
    """What the solver accepts.

    Args:
        min_samples: fewest samples with the board in view (6 give 15 relative motions: enough to average the
            noise of the closed-form solvers; 12-20 are recommended).
        min_corners: fewest ChArUco corners for a detection to count.
        min_rotation_deg: relative flange rotations smaller than this do not count towards the coverage (their
            axes are noise).
        min_axis_spread_deg: the rotation axes of the relative flange motions must spread at least this much
            (see :class:`RotationCoverage`); below it the set rotates about one axis only and is refused.
        max_iterations: cap on the refinement's function evaluations.
    """

    min_samples: int = 6
    min_corners: int = MIN_CORNERS
    min_rotation_deg: float = 5.0
    min_axis_spread_deg: float = 10.0
    max_iterations: int = 200

    def __post_init__(self) -> None:
        for name, low in (("min_samples", 3), ("min_corners", 4), ("max_iterations", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise CalibrationError(f"HandEyeConfig.{name} = {value!r} is invalid: give an integer >= {low}")
        for name, high in (("min_rotation_deg", 90.0), ("min_axis_spread_deg", 90.0)):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < high:
                raise CalibrationError(f"HandEyeConfig.{name} = {value!r} is invalid: give degrees in [0, {high})")


@dataclass(frozen=True)
class RotationCoverage:
    """How well the samples' flange orientations constrain a hand-eye solution.

    Over all pairs (i, j) of samples, the relative flange rotation ``R_i^T R_j`` (in the flange frame) has an angle
    and a unit axis. ``max_relative_rotation_deg``: the largest angle (the spread of orientations). Of the pairs
    rotating more than ``HandEyeConfig.min_rotation_deg`` (``pairs_used``), the axes' scatter matrix
    ``mean(a a^T)`` has eigenvalues ``axis_eigenvalues`` (descending, sum 1); ``axis_spread_deg =
    arccos(1 - 2 * lambda_2)`` is the angle between the axes when they fall into two groups of equal size, 0 when
    all axes are parallel (degenerate), about 70.5 for axes spread evenly over the sphere.
    """

    max_relative_rotation_deg: float
    axis_spread_deg: float
    axis_eigenvalues: tuple[float, float, float]
    pairs_used: int


@dataclass(frozen=True)
class HandEyeResult:
    """A solved hand-eye calibration.

    ``T_parent_cam`` (4, 4): the camera's pose in ``cam_parent_frame`` (``base`` for eye-to-hand: ``T_base_cam``;
    ``gripper`` (the flange) for eye-in-hand: ``T_flange_cam``). ``T_parent_board``: the board's pose in
    ``board_parent_frame`` (``T_flange_board`` / ``T_base_board``). Reprojection errors are pixel distances between
    detected and projected corners; the hand-eye residuals compare each sample's PnP board pose with the one the
    calibration predicts (rotation angle in degrees, translation distance in millimetres). ``sample_indices`` are
    the indices, in the input list, of the samples used; ``samples_skipped`` counts the ones without the board.
    ``initial_*`` describe the closed-form guess the refinement started from.
    """

    method: str
    T_parent_cam: np.ndarray
    T_parent_board: np.ndarray
    cam_parent_frame: str
    board_parent_frame: str
    sample_indices: list[int]
    samples_skipped: int
    per_sample_rms_px: list[float]
    reprojection_rms_px: float
    reprojection_max_px: float
    per_sample_rotation_deg: list[float]
    per_sample_translation_mm: list[float]
    handeye_rotation_deg: float
    handeye_translation_mm: float
    coverage: RotationCoverage
    initial_method: str
    initial_reprojection_rms_px: float
    T_parent_cam_initial: np.ndarray = field(repr=False, default=None)
    T_parent_board_initial: np.ndarray = field(repr=False, default=None)

    def predict_T_cam_board(self, T_base_flange: np.ndarray) -> np.ndarray:
        """(4, 4) board pose in the camera that the calibration predicts at flange pose ``T_base_flange``."""
        return _predict(self.T_parent_cam, self.T_parent_board, _motion(self.method, T_base_flange))

    def project_corners(self, T_base_flange: np.ndarray, spec: CharucoBoardSpec, K, dist=None, ids=None) -> np.ndarray:
        """(M, 2) pixel positions of the board's corners ``ids`` (default: all) reprojected through the calibration
        and the flange pose: what the overlay compares with the detected corners."""
        K, dist = check_intrinsics(K, dist)
        ids = np.arange(spec.n_corners) if ids is None else np.asarray(ids).reshape(-1)
        return _project(spec.corners_board_m()[ids], self.predict_T_cam_board(T_base_flange), K, dist)

    def residuals_dict(self) -> dict:
        """The ``residuals`` block of calibration.yaml (plain Python numbers)."""
        return {
            "samples": len(self.sample_indices),
            "samples_skipped": int(self.samples_skipped),
            "reprojection_rms_px": float(self.reprojection_rms_px),
            "reprojection_max_px": float(self.reprojection_max_px),
            "handeye_rotation_deg": float(self.handeye_rotation_deg),
            "handeye_translation_mm": float(self.handeye_translation_mm),
            "rotation_coverage_deg": float(self.coverage.max_relative_rotation_deg),
            "rotation_axis_spread_deg": float(self.coverage.axis_spread_deg),
            "per_sample_rms_px": [float(v) for v in self.per_sample_rms_px],
        }

    def summary(self) -> str:
        """A few lines for the terminal: the pose, the errors and the coverage."""
        xyz = self.T_parent_cam[:3, 3]
        rpy = Rotation.from_matrix(self.T_parent_cam[:3, :3]).as_euler("xyz", degrees=True)
        return (
            f"{self.method}: camera in {self.cam_parent_frame}: "
            f"xyz = [{xyz[0]:.4f}, {xyz[1]:.4f}, {xyz[2]:.4f}] m, "
            f"rpy = [{rpy[0]:.2f}, {rpy[1]:.2f}, {rpy[2]:.2f}] deg\n"
            f"  samples {len(self.sample_indices)} used, {self.samples_skipped} without the board\n"
            f"  reprojection rms {self.reprojection_rms_px:.3f} px, max {self.reprojection_max_px:.3f} px "
            f"(closed form {self.initial_method}: {self.initial_reprojection_rms_px:.3f} px)\n"
            f"  hand-eye residuals rms {self.handeye_rotation_deg:.3f} deg, {self.handeye_translation_mm:.2f} mm\n"
            f"  rotation coverage {self.coverage.max_relative_rotation_deg:.1f} deg, axis spread "
            f"{self.coverage.axis_spread_deg:.1f} deg over {self.coverage.pairs_used} pairs"
        )


# ---------------------------------------------------------------------------------------------------------------
def _motion(method: str, T_base_flange: np.ndarray) -> np.ndarray:
    """The arm's motion ``M_i`` of the module docstring for one flange pose."""
    T_base_flange = np.asarray(T_base_flange, dtype=np.float64)
    return T_base_flange if method == EYE_TO_HAND else invert_rigid(T_base_flange)


def _predict(P: np.ndarray, Q: np.ndarray, M: np.ndarray) -> np.ndarray:
    return invert_rigid(P) @ M @ Q  # (4, 4) T_cam_board


def _project(points_board: np.ndarray, T_cam_board: np.ndarray, K: np.ndarray, dist: np.ndarray) -> np.ndarray:
    rvec = cv2.Rodrigues(T_cam_board[:3, :3])[0]
    uv, _ = cv2.projectPoints(
        points_board.reshape(-1, 1, 3), rvec, T_cam_board[:3, 3].copy(), K, dist if dist.size else None
    )
    return uv.reshape(-1, 2)  # (M, 2)


def _se3(vec6: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(vec6[:3]).as_matrix()
    T[:3, 3] = vec6[3:]
    return T


def rotation_coverage(T_base_flange_list, config: HandEyeConfig | None = None) -> RotationCoverage:
    """The :class:`RotationCoverage` of a list of (4, 4) flange poses."""
    config = config or HandEyeConfig()
    R = np.stack([np.asarray(T, dtype=np.float64)[:3, :3] for T in T_base_flange_list])  # (N, 3, 3)
    i, j = np.triu_indices(R.shape[0], k=1)
    if i.size == 0:
        return RotationCoverage(0.0, 0.0, (0.0, 0.0, 0.0), 0)
    rel = np.einsum("pji,pjk->pik", R[i], R[j])  # (P, 3, 3) R_i^T R_j
    rotvec = Rotation.from_matrix(rel).as_rotvec()  # (P, 3)
    angle = np.linalg.norm(rotvec, axis=1)  # (P,)
    used = angle > math.radians(config.min_rotation_deg)
    if not np.any(used):
        return RotationCoverage(float(np.degrees(angle.max())), 0.0, (0.0, 0.0, 0.0), 0)
    axes = rotvec[used] / angle[used, None]  # (U, 3)
    scatter = axes.T @ axes / axes.shape[0]  # (3, 3)
    eig = np.sort(np.linalg.eigvalsh(scatter))[::-1]  # (3,) descending
    spread = math.degrees(math.acos(float(np.clip(1.0 - 2.0 * eig[1], -1.0, 1.0))))
    return RotationCoverage(float(np.degrees(angle.max())), spread, tuple(float(v) for v in eig), int(used.sum()))


def _check_coverage(coverage: RotationCoverage, config: HandEyeConfig) -> None:
    if coverage.pairs_used == 0:
        raise CalibrationError(
            f"the flange barely rotates between samples (largest relative rotation "
            f"{coverage.max_relative_rotation_deg:.1f} deg, under {config.min_rotation_deg} deg): hand-eye calibration "
            "needs rotations about at least two non-parallel axes; capture poses tilted 15-30 deg about the flange's "
            "x and y axes and yawed about its z axis"
        )
    if coverage.axis_spread_deg < config.min_axis_spread_deg:
        raise CalibrationError(
            f"the flange rotates about one axis only (rotation axes spread {coverage.axis_spread_deg:.1f} deg, under "
            f"{config.min_axis_spread_deg} deg): the translation along that axis cannot be found; add poses rotated "
            "about a second, non-parallel axis (tilt the flange about its x and y axes, not only one)"
        )


def _closed_form_candidates(
    method: str, M: list[np.ndarray], T_cam_board: list[np.ndarray]
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """[(solver name, P (4, 4), Q (4, 4))] from each of OpenCV's hand-eye solvers that returns a finite answer."""
    out = []
    R_a = [T[:3, :3] for T in T_cam_board]
    t_a = [T[:3, 3].reshape(3, 1) for T in T_cam_board]
    R_b = [T[:3, :3] for T in M]
    t_b = [T[:3, 3].reshape(3, 1) for T in M]
    for name in ("SHAH", "LI"):
        try:
            R_x, t_x, R_z, t_z = cv2.calibrateRobotWorldHandEye(
                R_a, t_a, R_b, t_b, method=getattr(cv2, f"CALIB_ROBOT_WORLD_HAND_EYE_{name}")
            )
        except cv2.error:
            continue
        X, Z = np.eye(4), np.eye(4)
        X[:3, :3], X[:3, 3] = R_x, np.asarray(t_x).reshape(3)
        Z[:3, :3], Z[:3, 3] = R_z, np.asarray(t_z).reshape(3)
        if np.all(np.isfinite(X)) and np.all(np.isfinite(Z)):
            out.append(
                (f"calibrateRobotWorldHandEye/{name}", _orthonormal(invert_rigid(Z)), _orthonormal(invert_rigid(X)))
            )
    G = [invert_rigid(T) for T in M]
    R_g = [T[:3, :3] for T in G]
    t_g = [T[:3, 3].reshape(3, 1) for T in G]
    for name in ("TSAI", "PARK", "HORAUD", "ANDREFF", "DANIILIDIS"):
        try:
            R_p, t_p = cv2.calibrateHandEye(R_g, t_g, R_a, t_a, method=getattr(cv2, f"CALIB_HAND_EYE_{name}"))
        except cv2.error:
            continue
        P = np.eye(4)
        P[:3, :3], P[:3, 3] = R_p, np.asarray(t_p).reshape(3)
        if not np.all(np.isfinite(P)):
            continue
        P = _orthonormal(P)
        Q_all = np.stack([Gi @ P @ C for Gi, C in zip(G, T_cam_board)])  # (N, 4, 4) one estimate of Q per sample
        Q = np.eye(4)
        Q[:3, :3] = Rotation.from_quat(
            quaternion_weighted_mean(Rotation.from_matrix(Q_all[:, :3, :3]).as_quat(), np.ones(len(G)))
        ).as_matrix()
        Q[:3, 3] = Q_all[:, :3, 3].mean(axis=0)
        out.append((f"calibrateHandEye/{name}", P, Q))
    return out


def _orthonormal(T: np.ndarray) -> np.ndarray:
    """``T`` with its rotation block projected onto the nearest rotation (the solvers' output is orthonormal only
    to their own precision)."""
    U, _, Vt = np.linalg.svd(T[:3, :3])
    out = T.copy()
    out[:3, :3] = U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt
    return out


def _solve(
    method: str, samples: list[HandEyeSample], spec: CharucoBoardSpec, config: HandEyeConfig | None
) -> HandEyeResult:
    config = config or HandEyeConfig()
    if not isinstance(spec, CharucoBoardSpec):
        raise CalibrationError(f"spec is a {type(spec).__name__}; give the CharucoBoardSpec of the filmed board")
    samples = list(samples)
    if not samples:
        raise CalibrationError(
            f"no samples: capture at least {config.min_samples} poses with the board in view (para-calib capture)"
        )
    corners_board = spec.corners_board_m()  # (N, 3)
    used, M, T_cam_board, Ks, dists, obs_ids, obs_px = [], [], [], [], [], [], []
    for index, sample in enumerate(samples):
        K, dist = check_intrinsics(sample.K, sample.dist, name=f"sample {index}: K")
        try:
            T_base_flange = check_rigid(sample.T_base_flange, name=f"sample {index}: T_base_flange")
        except ValueError as exc:
            raise CalibrationError(f"{exc}; give the flange pose from the arm's kinematics") from exc
        det = sample.detection
        if det is None or len(det) < config.min_corners:
            continue
        T_cb = board_pose_from_detection(det, spec, K, dist)
        if T_cb is None:
            continue
        used.append(index)
        M.append(_motion(method, T_base_flange))
        T_cam_board.append(T_cb)
        Ks.append(K)
        dists.append(dist)
        obs_ids.append(det.ids)
        obs_px.append(det.corners_px)
    skipped = len(samples) - len(used)
    if len(used) < config.min_samples:
        raise CalibrationError(
            f"only {len(used)} of {len(samples)} samples show the board ({skipped} without at least "
            f"{config.min_corners} ChArUco corners); at least {config.min_samples} are needed: capture more poses with "
            "the whole board in view, check the board options (squares, sizes, dictionary) match the printed board"
        )
    coverage = rotation_coverage([_motion(method, m) for m in M], config)  # the flange poses back from M
    _check_coverage(coverage, config)

    def residual(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        parts = [
            (_project(corners_board[ids], _predict(P, Q, Mi), K, d) - px).ravel()
            for Mi, K, d, ids, px in zip(M, Ks, dists, obs_ids, obs_px)
        ]
        return np.concatenate(parts)  # (2 * total corners,)

    def rms(P: np.ndarray, Q: np.ndarray) -> float:
        r = residual(P, Q)
        return float(np.sqrt(np.mean(r**2) * 2.0))  # per-point distance rms

    candidates = _closed_form_candidates(method, M, T_cam_board)
    if not candidates:
        raise CalibrationError(
            "every OpenCV hand-eye solver failed on these samples; check the flange poses and the "
            "detections belong together (same time stamps) and the poses rotate about two axes"
        )
    scored = sorted(((rms(P, Q), name, P, Q) for name, P, Q in candidates), key=lambda item: item[0])
    initial_rms, initial_name, P0, Q0 = scored[0]

    def fun(x: np.ndarray) -> np.ndarray:
        return residual(P0 @ _se3(x[:6]), Q0 @ _se3(x[6:]))

    fit = least_squares(fun, np.zeros(12), method="lm", max_nfev=config.max_iterations * 13, xtol=1e-12, ftol=1e-12)
    P, Q = P0 @ _se3(fit.x[:6]), Q0 @ _se3(fit.x[6:])
    if rms(P, Q) > initial_rms:  # never return something worse than the closed form
        P, Q = P0, Q0

    per_sample_rms, all_err, rot_deg, trans_mm = [], [], [], []
    for Mi, K, d, ids, px, T_obs in zip(M, Ks, dists, obs_ids, obs_px, T_cam_board):
        T_pred = _predict(P, Q, Mi)
        err = np.linalg.norm(_project(corners_board[ids], T_pred, K, d) - px, axis=1)  # (m,)
        all_err.append(err)
        per_sample_rms.append(float(np.sqrt(np.mean(err**2))))
        rot_deg.append(math.degrees(rotation_angle_between(T_pred[:3, :3], T_obs[:3, :3])))
        trans_mm.append(1000.0 * float(np.linalg.norm(T_pred[:3, 3] - T_obs[:3, 3])))
    all_err = np.concatenate(all_err)
    cam_parent, board_parent = PARENT_FRAMES[method]
    return HandEyeResult(
        method=method,
        T_parent_cam=P,
        T_parent_board=Q,
        cam_parent_frame=cam_parent,
        board_parent_frame=board_parent,
        sample_indices=used,
        samples_skipped=skipped,
        per_sample_rms_px=per_sample_rms,
        reprojection_rms_px=float(np.sqrt(np.mean(all_err**2))),
        reprojection_max_px=float(all_err.max()),
        per_sample_rotation_deg=rot_deg,
        per_sample_translation_mm=trans_mm,
        handeye_rotation_deg=float(np.sqrt(np.mean(np.square(rot_deg)))),
        handeye_translation_mm=float(np.sqrt(np.mean(np.square(trans_mm)))),
        coverage=coverage,
        initial_method=initial_name,
        initial_reprojection_rms_px=initial_rms,
        T_parent_cam_initial=P0,
        T_parent_board_initial=Q0,
    )


def solve_eye_to_hand(
    samples: list[HandEyeSample], spec: CharucoBoardSpec, config: HandEyeConfig | None = None
) -> HandEyeResult:
    """Fixed camera, board on the flange: ``T_parent_cam = T_base_cam``, ``T_parent_board = T_flange_board``.

    :raises CalibrationError: too few samples with the board, rotations about fewer than two axes, a zero focal
        length, a non-rigid flange pose.
    """
    return _solve(EYE_TO_HAND, samples, spec, config)


def solve_eye_in_hand(
    samples: list[HandEyeSample], spec: CharucoBoardSpec, config: HandEyeConfig | None = None
) -> HandEyeResult:
    """Camera on the flange, board fixed in the scene: ``T_parent_cam = T_flange_cam`` (the wrist mount, parent
    ``gripper``), ``T_parent_board = T_base_board``.

    :raises CalibrationError: as :func:`solve_eye_to_hand`.
    """
    return _solve(EYE_IN_HAND, samples, spec, config)
