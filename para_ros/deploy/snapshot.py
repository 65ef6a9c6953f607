"""A picture of what the policy predicted: the scene camera image with the predicted path and argmax voxels drawn in.

ROS-free (numpy + cv2), so it is testable on synthetic data and usable on a bag offline. Conventions
(docs/contracts.md): OpenCV pinhole, ``T_world_cam`` maps camera (optical) to world coordinates, continuous pixel
coordinates with pixel (col, row) centred at (col + 0.5, row + 0.5); cv2 drawing addresses pixel centres by their
integer index, so a continuous ``u`` is drawn at ``u - 0.5``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from para_core.eval.projection import project_points

DRAW_SHIFT = 4  # cv2 sub-pixel drawing: coordinates in 1/16 pixel


def scale_intrinsics(K: np.ndarray, scale: float) -> np.ndarray:
    """K of the image resized by ``scale`` (contract: u -> s*u, so K' = diag(s, s, 1) @ K)."""
    return np.diag([scale, scale, 1.0]) @ np.asarray(K, dtype=np.float64)


@dataclass
class SnapshotScene:
    """Everything drawn into one snapshot (world frame, metres).

    Args:
        image_rgb: (H, W, 3) uint8 scene camera image.
        K: (3, 3) its intrinsics.
        T_world_cam: (4, 4) its pose at the image stamp.
        path_world: (T, 3) predicted chunk positions (the argmax voxel of each step), in step order.
        ee_world: (3,) end-effector position at the observation, or None.
        voxel_size_m: edge of one voxel, for the drawn squares.
        voxels_world: (M, 3) most probable voxels (optional), ``voxels_prob`` (M,) their probabilities.
        lines: caption lines written at the top-left.
    """

    image_rgb: np.ndarray
    K: np.ndarray
    T_world_cam: np.ndarray
    path_world: np.ndarray
    ee_world: np.ndarray | None = None
    voxel_size_m: float = 0.01
    voxels_world: np.ndarray | None = None
    voxels_prob: np.ndarray | None = None
    lines: Sequence[str] = ()


def _pt(uv: np.ndarray) -> tuple[int, int]:
    """Continuous (u, v) -> cv2 fixed-point pixel index (centre convention), for ``shift=DRAW_SHIFT``."""
    f = 1 << DRAW_SHIFT
    return int(round((uv[0] - 0.5) * f)), int(round((uv[1] - 0.5) * f))


def step_color_bgr(i: int, n: int) -> tuple[int, int, int]:
    """Early steps green -> late steps blue (same ramp as the rviz markers)."""
    f = i / max(n - 1, 1)
    return int(255 * (0.3 + 0.7 * f)), int(255 * (1.0 - 0.7 * f)), 25


def draw_snapshot(scene: SnapshotScene, scale: float = 3.0) -> np.ndarray:
    """Render ``scene`` into a BGR uint8 image ``scale`` times the camera image's size (for ``cv2.imwrite``)."""
    if scene.image_rgb.ndim != 3 or scene.image_rgb.shape[2] != 3:
        raise ValueError(f"image_rgb has shape {scene.image_rgb.shape}: expected (H, W, 3)")
    h, w = scene.image_rgb.shape[:2]
    out = cv2.resize(
        cv2.cvtColor(scene.image_rgb, cv2.COLOR_RGB2BGR),
        (int(round(w * scale)), int(round(h * scale))),
        interpolation=cv2.INTER_NEAREST,
    )
    K = scale_intrinsics(scene.K, scale)
    f_px = 0.5 * (K[0, 0] + K[1, 1])
    line = cv2.LINE_AA
    s = DRAW_SHIFT

    if scene.voxels_world is not None and len(scene.voxels_world):
        uv, depth = project_points(scene.voxels_world, K, scene.T_world_cam)
        prob = np.ones(len(uv)) if scene.voxels_prob is None else np.asarray(scene.voxels_prob, dtype=np.float64)
        prob = prob / max(float(np.max(prob)), 1e-12)
        for p, _depth_m, pr in zip(uv, depth, prob):
            if np.all(np.isfinite(p)):
                cv2.circle(out, _pt(p), 2 << s, (0, int(80 + 175 * pr), int(255 * pr)), -1, line, s)

    path = np.asarray(scene.path_world, dtype=np.float64).reshape(-1, 3)
    pts = path if scene.ee_world is None else np.vstack([np.asarray(scene.ee_world, dtype=np.float64)[None], path])
    uv, depth = project_points(pts, K, scene.T_world_cam)
    for a, b in zip(uv[:-1], uv[1:]):
        if np.all(np.isfinite(a)) and np.all(np.isfinite(b)):
            cv2.line(out, _pt(a), _pt(b), (20, 200, 255), 2, line, s)
    offset = 0 if scene.ee_world is None else 1
    n = len(path)
    for i in range(n):
        p, d = uv[offset + i], depth[offset + i]
        if not np.all(np.isfinite(p)):
            continue
        half = max(2.0, 0.5 * f_px * scene.voxel_size_m / d)
        c = _pt(p)
        r = int(round(half * (1 << s)))
        cv2.rectangle(out, (c[0] - r, c[1] - r), (c[0] + r, c[1] + r), step_color_bgr(i, n), -1, line, s)
        cv2.rectangle(out, (c[0] - r, c[1] - r), (c[0] + r, c[1] + r), (0, 0, 0), 1, line, s)
    if scene.ee_world is not None and np.all(np.isfinite(uv[0])):
        cv2.circle(out, _pt(uv[0]), 6 << s, (40, 40, 255), 2, line, s)

    if scene.lines:
        banner = out[: 8 + 20 * len(scene.lines)]
        banner[:] = (0.35 * banner).astype(np.uint8)  # darken behind the caption
        for k, text in enumerate(scene.lines):
            cv2.putText(out, text, (8, 20 + 20 * k), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, line)
    return out
