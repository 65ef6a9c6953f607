"""Synthetic hand-eye scenes with known truth, built only from numpy, scipy's Rotation and cv2.projectPoints (not
from the solver under test)."""

from __future__ import annotations

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.detection import CharucoDetection
from para_core.calibration.handeye import HandEyeSample

SPEC = CharucoBoardSpec(squares_x=5, squares_y=7, square_m=0.03, marker_m=0.022, dictionary="DICT_5X5_100")
WIDTH, HEIGHT = 640, 480
K = np.array([[600.0, 0.0, 319.5], [0.0, 600.0, 239.5], [0.0, 0.0, 1.0]])
DIST = np.array([0.02, -0.01, 0.0005, -0.0003, 0.0])


def pose(xyz, rotvec_deg) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(np.radians(rotvec_deg)).as_matrix()
    T[:3, 3] = xyz
    return T


# Truth for eye-to-hand: a scene camera 0.9 m in front of the base looking back at the workspace, the board
# mounted 2 cm in front of the flange (its centre on the flange axis).
T_BASE_CAM = (
    pose([0.95, 0.05, 0.55], [0.0, 0.0, 0.0])
    @ pose([0, 0, 0], [0.0, -90.0, 0.0])
    @ pose([0, 0, 0], [0, 0, 90.0])
    @ pose([0, 0, 0], [-30.0, 0, 0])
)
T_FLANGE_BOARD = pose([-0.075, -0.105, 0.02], [2.0, -3.0, 5.0])
# Truth for eye-in-hand: the wrist camera 6 cm off the flange axis looking along it, the board on the table.
T_FLANGE_CAM = pose([0.0, -0.06, 0.03], [-8.0, 4.0, 91.0])
T_BASE_BOARD = pose([0.30, -0.10, 0.0], [180.0, 0.0, 20.0])


def board_views(
    n: int, rng: np.random.Generator, single_axis: bool = False, max_tilt_deg: float = 30.0
) -> list[np.ndarray]:
    """``n`` board poses in the camera (4, 4), 0.4-0.6 m away, tilted up to ``max_tilt_deg`` about the camera's x and
    y axes and yawed up to 30 deg; ``single_axis``: every rotation about the camera's x axis only."""
    views = []
    for k in range(n):
        if single_axis:
            rotvec = [-max_tilt_deg + 2 * max_tilt_deg * k / max(n - 1, 1), 0.0, 0.0]
        else:
            rotvec = [
                rng.uniform(-max_tilt_deg, max_tilt_deg),
                rng.uniform(-max_tilt_deg, max_tilt_deg),
                rng.uniform(-30.0, 30.0),
            ]
        R = Rotation.from_rotvec(np.radians(rotvec)).as_matrix()
        centre_cam = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.04, 0.04), rng.uniform(0.4, 0.6)])
        centre_board = np.array([*SPEC.size_m, 0.0]) / 2.0
        T = np.eye(4)
        T[:3, :3] = R
        T[:3, 3] = centre_cam - R @ centre_board
        views.append(T)
    return views


def flange_pose(method: str, T_cam_board: np.ndarray) -> np.ndarray:
    """The flange pose at which the truth gives that board view."""
    if method == "eye_to_hand":
        return T_BASE_CAM @ T_cam_board @ np.linalg.inv(T_FLANGE_BOARD)
    return T_BASE_BOARD @ np.linalg.inv(T_cam_board) @ np.linalg.inv(T_FLANGE_CAM)


def project(T_cam_board: np.ndarray, K=K, dist=DIST) -> tuple[np.ndarray, np.ndarray]:
    """(ids (M,), corners_px (M, 2)) of the corners inside the image, by cv2.projectPoints."""
    obj = SPEC.cv_board().getChessboardCorners().astype(np.float64)  # (N, 3) OpenCV's own corner table
    rvec = cv2.Rodrigues(T_cam_board[:3, :3])[0]
    uv = cv2.projectPoints(obj, rvec, T_cam_board[:3, 3], K, dist)[0].reshape(-1, 2)
    inside = (uv[:, 0] > 5) & (uv[:, 0] < WIDTH - 6) & (uv[:, 1] > 5) & (uv[:, 1] < HEIGHT - 6)
    return np.flatnonzero(inside), uv[inside]


def synthetic_samples(
    method: str, n: int, noise_px: float, seed: int = 0, single_axis: bool = False, K=K, dist=DIST
) -> list[HandEyeSample]:
    rng = np.random.default_rng(seed)
    samples = []
    for T_cam_board in board_views(n, rng, single_axis=single_axis):
        ids, uv = project(T_cam_board, dist=dist)
        uv = uv + rng.normal(0.0, noise_px, uv.shape)
        samples.append(
            HandEyeSample(
                T_base_flange=flange_pose(method, T_cam_board),
                detection=CharucoDetection(ids=ids, corners_px=uv),
                K=np.asarray(K),
                dist=dist,
                image_size=(WIDTH, HEIGHT),
            )
        )
    return samples


def transform_error(T_a: np.ndarray, T_b: np.ndarray) -> tuple[float, float]:
    """(translation error mm, rotation error deg) between two (4, 4) transforms."""
    dR = T_a[:3, :3].T @ T_b[:3, :3]
    angle = np.degrees(np.arccos(np.clip((np.trace(dR) - 1.0) / 2.0, -1.0, 1.0)))
    return 1000.0 * float(np.linalg.norm(T_a[:3, 3] - T_b[:3, 3])), float(angle)


# Texture of the rendered board: pixels per metre and white margin (pixels) of SPEC.image().
TEXTURE_PX_PER_M = 4000.0
TEXTURE_MARGIN_PX = 60
SUPERSAMPLE = 3


def render_board(
    T_cam_board: np.ndarray,
    K=K,
    texture: np.ndarray | None = None,
    noise_grey: float = 2.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """(HEIGHT, WIDTH) uint8 image of the board seen by a distortion-free pinhole camera K at ``T_cam_board``, on a
    grey background: cv2.warpPerspective of the board texture through the plane homography K [r1 r2 t] at
    SUPERSAMPLE times the resolution, area-averaged down (pixel-centre conventions kept exact), plus grey noise."""
    if texture is None:
        texture = SPEC.image(TEXTURE_PX_PER_M, margin_px=TEXTURE_MARGIN_PX)
    # texture pixel (centre convention) of board point (x, y): margin + x * px_per_m - 0.5 (SPEC.image's docstring)
    A = np.array(
        [
            [TEXTURE_PX_PER_M, 0.0, TEXTURE_MARGIN_PX - 0.5],
            [0.0, TEXTURE_PX_PER_M, TEXTURE_MARGIN_PX - 0.5],
            [0.0, 0.0, 1.0],
        ]
    )
    s = SUPERSAMPLE
    K_big = np.array([[s, 0.0, (s - 1) / 2.0], [0.0, s, (s - 1) / 2.0], [0.0, 0.0, 1.0]]) @ K
    H_board_to_img = K_big @ np.column_stack([T_cam_board[:3, 0], T_cam_board[:3, 1], T_cam_board[:3, 3]])
    H = H_board_to_img @ np.linalg.inv(A)
    big = cv2.warpPerspective(
        texture, H, (WIDTH * s, HEIGHT * s), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=110
    )
    img = cv2.resize(big, (WIDTH, HEIGHT), interpolation=cv2.INTER_AREA).astype(np.float64)
    if noise_grey:
        img += (rng or np.random.default_rng(0)).normal(0.0, noise_grey, img.shape)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)
