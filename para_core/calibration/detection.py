"""ChArUco board detection (OpenCV ``aruco``) and the board's pose in the camera by PnP."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.errors import CalibrationError

# Fewest ChArUco corners for a detection to count: PnP needs 4 non-collinear points; 6 keeps single-row hits out.
MIN_CORNERS = 6


@dataclass(frozen=True)
class CharucoDetection:
    """ChArUco corners found in one image: ``ids`` (M,) int corner ids (rows of ``spec.corners_board_m()``) and
    ``corners_px`` (M, 2) float64 pixel positions in OpenCV's pixel-centre convention (pixel (0, 0)'s centre is
    (0, 0)), as ``cv2.projectPoints`` gives them."""

    ids: np.ndarray
    corners_px: np.ndarray

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids).reshape(-1).astype(np.int64)  # (M,)
        corners = np.asarray(self.corners_px, dtype=np.float64).reshape(-1, 2)  # (M, 2)
        if ids.shape[0] != corners.shape[0]:
            raise CalibrationError(
                f"CharucoDetection has {ids.shape[0]} ids and {corners.shape[0]} corners; give one "
                "pixel position per id"
            )
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "corners_px", corners)

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def check_intrinsics(K, dist=None, name: str = "K") -> tuple[np.ndarray, np.ndarray]:
    """(K (3, 3) float64, dist (D,) float64) after checking K is a usable pinhole matrix.

    :raises CalibrationError: non-finite, zero or negative focal length (an uncalibrated CameraInfo).
    """
    K = np.asarray(K, dtype=np.float64)
    if K.shape != (3, 3) or not np.all(np.isfinite(K)):
        raise CalibrationError(f"{name} = {K.tolist()} is not a finite 3x3 camera matrix; give the camera's intrinsics")
    if K[0, 0] <= 0.0 or K[1, 1] <= 0.0:
        raise CalibrationError(
            f"{name} has focal length fx = {K[0, 0]}, fy = {K[1, 1]}: the camera is not calibrated. "
            "Calibrate its intrinsics first (e.g. OpenCV's or ROS camera_calibration) and publish "
            "them in CameraInfo.k"
        )
    dist = np.zeros(0) if dist is None else np.asarray(dist, dtype=np.float64).reshape(-1)  # (D,)
    if not np.all(np.isfinite(dist)):
        raise CalibrationError(f"distortion coefficients {dist.tolist()} are not finite; give the camera's own ones")
    return K, dist


def _subpixel_window(corners_px: np.ndarray, spec: CharucoBoardSpec) -> int:
    """Half-size (px) of the corner refinement window: the marker-free zone around a ChArUco corner is
    (square_m - marker_m) / 2 on each side, so the window spans that fraction of the smallest distance between two
    detected corners, clamped to [2, 8] px. Wider windows reach the markers' edges and bias the corner (measured on
    rendered 5x7 boards at 0.4-0.6 m: 0.067 px rms with this window, 0.11 px at a quarter of the spacing)."""
    if corners_px.shape[0] < 2:
        return 2
    d = np.linalg.norm(corners_px[:, None, :] - corners_px[None, :, :], axis=-1)  # (M, M)
    np.fill_diagonal(d, np.inf)
    fraction = (spec.square_m - spec.marker_m) / (2.0 * spec.square_m)
    return int(np.clip(fraction * float(d.min()), 2, 8))


def detect_charuco(
    image: np.ndarray, spec: CharucoBoardSpec, K=None, dist=None, min_corners: int = MIN_CORNERS
) -> CharucoDetection | None:
    """ChArUco corners of ``spec`` in ``image`` ((H, W) grey or (H, W, 3) BGR/RGB uint8), or None when fewer than
    ``min_corners`` are found.

    OpenCV's ``CharucoDetector`` finds and identifies the corners; they are then re-refined with ``cornerSubPix`` on
    the grey image, because the detector's own refinement reports positions half a pixel off OpenCV's pixel-centre
    convention (measured on rendered boards: +0.5 px in x and y), which would bias the principal point of the
    calibration. ``K``/``dist`` (optional) let the detector use the camera model to interpolate corners.
    """
    image = np.asarray(image)
    if image.ndim == 3:
        grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.shape[2] == 3 else image[..., 0]
    elif image.ndim == 2:
        grey = image
    else:
        raise CalibrationError(f"image has shape {image.shape}; give an (H, W) grey or (H, W, 3) colour image")
    grey = np.ascontiguousarray(grey, dtype=np.uint8)  # (H, W)
    charuco_params = cv2.aruco.CharucoParameters()
    if K is not None:
        K, dist = check_intrinsics(K, dist)
        charuco_params.cameraMatrix = K
        charuco_params.distCoeffs = dist if dist.size else np.zeros(5)
    detector = cv2.aruco.CharucoDetector(spec.cv_board(), charuco_params)
    corners, ids, _, _ = detector.detectBoard(grey)
    if ids is None or len(ids) < min_corners:
        return None
    corners = corners.reshape(-1, 2).astype(np.float32)  # (M, 2)
    ids = ids.reshape(-1)  # (M,)
    half = _subpixel_window(corners, spec)
    refined = cv2.cornerSubPix(
        grey,
        corners.reshape(-1, 1, 2).copy(),
        (half, half),
        (-1, -1),
        (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 50, 1e-3),
    ).reshape(-1, 2)
    # A corner that the re-refinement moved by more than its window is not trusted: keep the detector's position.
    moved = np.linalg.norm(refined - corners, axis=1) > half
    refined[moved] = corners[moved]
    return CharucoDetection(ids=ids, corners_px=refined.astype(np.float64))


def board_pose_from_detection(det: CharucoDetection | None, spec: CharucoBoardSpec, K, dist=None) -> np.ndarray | None:
    """``T_cam_board`` (4, 4) from a detection by PnP (``cv2.solvePnP``, iterative, on all detected corners), or None
    when there is no detection, too few corners, or PnP fails."""
    if det is None or len(det) < 4:
        return None
    K, dist = check_intrinsics(K, dist)
    if np.any(det.ids < 0) or np.any(det.ids >= spec.n_corners):
        raise CalibrationError(
            f"detection has corner ids outside 0..{spec.n_corners - 1}: it is not of this board "
            f"({spec.squares_x}x{spec.squares_y}); give the board that was filmed"
        )
    obj = spec.corners_board_m()[det.ids]  # (M, 3)
    ok, rvec, tvec = cv2.solvePnP(obj, det.corners_px, K, dist if dist.size else None, flags=cv2.SOLVEPNP_ITERATIVE)
    if not ok or not np.all(np.isfinite(rvec)) or not np.all(np.isfinite(tvec)):
        return None
    T = np.eye(4)
    T[:3, :3] = cv2.Rodrigues(rvec)[0]
    T[:3, 3] = tvec.reshape(3)
    if T[2, 3] <= 0.0:
        return None
    return T  # (4, 4) T_cam_board
