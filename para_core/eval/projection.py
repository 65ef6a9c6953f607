"""World points into a pinhole camera image, in NumPy: what every overlay and figure draws with (the model's own,
batched and differentiable, is ``para_core.model.geometry.project``; the same K and pose conventions).

Conventions: ``K`` (3, 3) in pixels of the image drawn on, with continuous pixel coordinates as the model uses them
(a pixel's centre at +0.5: OpenCV drawing wants ``uv - 0.5``); ``T_world_cam`` (4, 4) maps the camera's OpenCV optical
frame (x right, y down, z forward) to the world. No lens distortion (images are rectified or simulated).
"""

from __future__ import annotations

import numpy as np

MIN_DEPTH_M = 1e-6  # points nearer the camera plane than this (or behind it) are not projected


def project_points(points_world: np.ndarray, K: np.ndarray, T_world_cam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) world points (metres) -> ``uv`` (N, 2) pixels (NaN for a point not in front of the camera, depth at
    most :data:`MIN_DEPTH_M`) and ``depth_m`` (N,) along the optical axis (negative behind)."""
    pts = np.asarray(points_world, dtype=np.float64).reshape(-1, 3)  # (N, 3)
    T = np.asarray(T_world_cam, dtype=np.float64)
    p_cam = (pts - T[:3, 3]) @ T[:3, :3]  # (N, 3) = R^T (p - t)
    depth_m = p_cam[:, 2]  # (N,)
    uv = np.full((len(pts), 2), np.nan)  # (N, 2)
    front = depth_m > MIN_DEPTH_M
    pix = p_cam[front] @ np.asarray(K, dtype=np.float64).T  # (M, 3)
    uv[front] = pix[:, :2] / pix[:, 2:3]
    return uv, depth_m
