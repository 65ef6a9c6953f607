"""Re-estimate the scene camera's pose from normal operation: the gripper's ArUco marker seen while the arm works.

Every image where the marker is found gives four corners whose positions in ``base`` the arm knows (forward
kinematics ``T_base_flange`` at the image's stamp and the marker's mount ``T_flange_marker``). The camera pose
``T_base_cam`` is the one that projects them onto the detected corners: the same reprojection model and refinement
as the hand-eye solver (:mod:`para_core.calibration.handeye`: ``cv2.projectPoints`` with each image's K and
distortion, ``scipy.optimize.least_squares`` on a rotation vector and a translation applied on the right of the
initial guess), with the marker's mount held at its known value. The joint hand-eye solve (camera AND mount) needs
flange rotations about two non-parallel axes; a pick-and-place arm mostly yaws a downward gripper, a set that solver
rightly refuses, while the camera alone is fixed by the marker's positions spread over the workspace.

Initial guess: one ``cv2.solvePnP`` over all the corners of all images (they are spread in 3-D), and the told pose
when given; the refinement starts from the better of the two.

Coverage: the marker's centre over the images, in ``base``: the spread (standard deviation) along its principal axes.
A recording where the arm hardly moves leaves the pose to four corners a few centimetres apart (depth and tilt
poorly fixed); it is refused when the SECOND principal spread is under ``min_spread_m`` (positions on a point or a
line), naming the figures. The largest flange rotation between images is reported too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
from scipy.optimize import least_squares

from para_core.calibration.detection import check_intrinsics
from para_core.calibration.errors import CalibrationError
from para_core.calibration.handeye import EYE_TO_HAND, PARENT_FRAMES, HandEyeResult, _project, _se3, rotation_coverage
from para_core.calibration.marker import ArucoMarkerSpec
from para_core.model.rotations import check_rigid, invert_rigid


@dataclass(frozen=True)
class MarkerSample:
    """One scene image where the marker was found: ``corners_px`` (4, 2) (OpenCV pixel-centre convention, the order
    of :meth:`ArucoMarkerSpec.corners_marker_m`), the flange pose ``T_base_flange`` (4, 4) at its stamp, the image's
    ``K`` (3, 3) and distortion ``dist`` (D,) or None."""

    corners_px: np.ndarray
    T_base_flange: np.ndarray
    K: np.ndarray
    dist: np.ndarray | None = None


@dataclass(frozen=True)
class RefineConfig:
    """What the refinement accepts.

    Args:
        min_samples: fewest images with the marker.
        min_spread_m: the marker's positions must spread at least this much (standard deviation, metres) along
            their second principal axis (see :class:`MarkerCoverage`).
        max_iterations: cap on the refinement's function evaluations (times 7, one per parameter and one).
    """

    min_samples: int = 20
    min_spread_m: float = 0.03
    max_iterations: int = 200

    def __post_init__(self) -> None:
        for name, low in (("min_samples", 3), ("max_iterations", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise CalibrationError(f"RefineConfig.{name} = {v!r} is invalid: give an integer >= {low}")
        v = self.min_spread_m
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 1.0:
            raise CalibrationError(f"RefineConfig.min_spread_m = {v!r} is invalid: give metres in (0, 1)")


@dataclass(frozen=True)
class MarkerCoverage:
    """The marker centre's spread over the images: standard deviations (metres) along its three principal axes,
    largest first, and the largest flange rotation between two images (degrees)."""

    spread_m: tuple[float, float, float]
    max_relative_rotation_deg: float

    def text(self) -> str:
        s = self.spread_m
        return (
            f"marker positions spread {1000 * s[0]:.0f} / {1000 * s[1]:.0f} / {1000 * s[2]:.0f} mm (std along their "
            f"principal axes), flange rotation up to {self.max_relative_rotation_deg:.1f} deg"
        )


def marker_coverage(samples: list[MarkerSample], T_flange_marker: np.ndarray, spec: ArucoMarkerSpec) -> MarkerCoverage:
    """The :class:`MarkerCoverage` of ``samples``."""
    centre = np.append(spec.centre_marker_m(), 1.0)  # (4,)
    pts = np.stack([(np.asarray(s.T_base_flange) @ T_flange_marker @ centre)[:3] for s in samples])  # (N, 3)
    cov = np.cov(pts.T) if len(pts) > 1 else np.zeros((3, 3))
    eig = np.sort(np.clip(np.linalg.eigvalsh(cov), 0.0, None))[::-1]  # (3,)
    rot = rotation_coverage([s.T_base_flange for s in samples]).max_relative_rotation_deg if len(samples) > 1 else 0.0
    return MarkerCoverage(tuple(float(math.sqrt(v)) for v in eig), float(rot))


def refine_scene_camera(
    samples: list[MarkerSample],
    spec: ArucoMarkerSpec,
    T_flange_marker: np.ndarray,
    T_base_cam_told: np.ndarray | None = None,
    config: RefineConfig | None = None,
) -> tuple[HandEyeResult, MarkerCoverage]:
    """The scene camera's pose from marker samples (see the module docstring), as a ``HandEyeResult``
    (``T_parent_cam = T_base_cam``, ``T_parent_board = T_flange_marker``, its residuals) and the coverage.

    :raises CalibrationError: too few samples, too little motion (the coverage figures), bad poses or K.
    """
    config = config or RefineConfig()
    samples = list(samples)
    if len(samples) < config.min_samples:
        raise CalibrationError(
            f"only {len(samples)} images show the marker; at least {config.min_samples} are needed: record longer "
            "with the marker in the scene camera's view"
        )
    try:
        Q = check_rigid(T_flange_marker, name="T_flange_marker")
        told = None if T_base_cam_told is None else check_rigid(T_base_cam_told, name="T_base_cam_told")
        flanges = [check_rigid(s.T_base_flange, name=f"sample {i}: T_base_flange") for i, s in enumerate(samples)]
    except ValueError as exc:
        raise CalibrationError(str(exc)) from exc
    Ks, dists, obs = [], [], []
    for i, s in enumerate(samples):
        K, d = check_intrinsics(s.K, s.dist, name=f"sample {i}: K")
        px = np.asarray(s.corners_px, dtype=np.float64)
        if px.shape != (4, 2) or not np.all(np.isfinite(px)):
            raise CalibrationError(f"sample {i}: corners_px has shape {px.shape}; give the marker's 4 (u, v) corners")
        Ks.append(K)
        dists.append(d)
        obs.append(px)
    coverage = marker_coverage(samples, Q, spec)
    if coverage.spread_m[1] < config.min_spread_m:
        raise CalibrationError(
            f"the arm hardly moves in this recording: {coverage.text()}; the second spread must be at least "
            f"{1000 * config.min_spread_m:.0f} mm to fix the camera's pose. Record normal operation over the "
            "workspace (several picks and places), not the arm at rest"
        )
    corners_m = spec.corners_marker_m()  # (4, 3)
    corners_base = [(T @ Q @ np.c_[corners_m, np.ones(4)].T).T[:, :3] for T in flanges]  # N x (4, 3)

    def residual(T_base_cam: np.ndarray) -> np.ndarray:
        T_cam_base = invert_rigid(T_base_cam)
        parts = [(_project(pts, T_cam_base, K, d) - px).ravel() for pts, K, d, px in zip(corners_base, Ks, dists, obs)]
        return np.concatenate(parts)  # (8 N,)

    def rms(T_base_cam: np.ndarray) -> float:
        return float(np.sqrt(np.mean(residual(T_base_cam) ** 2) * 2.0))

    candidates = []
    ok, rvec, tvec = cv2.solvePnP(
        np.concatenate(corners_base),
        np.concatenate(obs),
        Ks[0],
        dists[0] if dists[0].size else None,
        flags=cv2.SOLVEPNP_ITERATIVE,
    )
    if ok and np.all(np.isfinite(rvec)) and np.all(np.isfinite(tvec)):
        T_cam_base = np.eye(4)
        T_cam_base[:3, :3] = cv2.Rodrigues(rvec)[0]
        T_cam_base[:3, 3] = tvec.reshape(3)
        candidates.append(("solvePnP over all corners", invert_rigid(T_cam_base)))
    if told is not None:
        candidates.append(("told pose", told))
    if not candidates:
        raise CalibrationError("no initial pose: solvePnP failed and no told pose was given; give the told pose")
    initial_rms, initial_name, P0 = min(((rms(P), name, P) for name, P in candidates), key=lambda c: c[0])
    fit = least_squares(
        lambda x: residual(P0 @ _se3(x)),
        np.zeros(6),
        method="lm",
        max_nfev=config.max_iterations * 7,
        xtol=1e-12,
        ftol=1e-12,
    )
    P = P0 @ _se3(fit.x)
    if rms(P) > initial_rms:
        P = P0
    per_sample, all_err = [], []
    T_cam_base = invert_rigid(P)
    for pts, K, d, px in zip(corners_base, Ks, dists, obs):
        err = np.linalg.norm(_project(pts, T_cam_base, K, d) - px, axis=1)  # (4,)
        per_sample.append(float(np.sqrt(np.mean(err**2))))
        all_err.append(err)
    all_err = np.concatenate(all_err)
    cam_parent, board_parent = PARENT_FRAMES[EYE_TO_HAND]
    result = HandEyeResult(
        method=EYE_TO_HAND,
        T_parent_cam=P,
        T_parent_board=Q,
        cam_parent_frame=cam_parent,
        board_parent_frame=board_parent,
        sample_indices=list(range(len(samples))),
        samples_skipped=0,
        per_sample_rms_px=per_sample,
        reprojection_rms_px=float(np.sqrt(np.mean(all_err**2))),
        reprojection_max_px=float(all_err.max()),
        per_sample_rotation_deg=[],
        per_sample_translation_mm=[],
        handeye_rotation_deg=0.0,  # no per-image PnP pose is compared: the marker's 4 corners fix one poorly
        handeye_translation_mm=0.0,
        coverage=rotation_coverage(flanges),
        initial_method=initial_name,
        initial_reprojection_rms_px=initial_rms,
        T_parent_cam_initial=P0,
        T_parent_board_initial=Q,
    )
    return result, coverage
